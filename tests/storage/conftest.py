"""Storage tests: real files in tmp_path, batches built by kafka-python."""

from __future__ import annotations

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)

"""Storage tests: real files in tmp_path, batches built by kafka-python.

``make_log(**config)`` opens a new, empty log with ``open_log``'s settings on each backend
the embedded API promises the same semantics on: ``disk`` (``open_log(tmp_path / ...,
create=True)``) and ``memory`` (``memory_log``, a private tmpfs directory). Tests taking it
run twice; tests about files on disk (reopen, crash, check/recover, backup of a
directory) keep ``tmp_path`` and ``open_log`` and are disk-only. (The fixtures live in
``tests/_logs.py``, shared with ``tests/aio``; ``fake_clock``, the subscription tests' hand-moved
clock, in ``_clock.py``.)
"""

from __future__ import annotations

from tests._logs import BACKENDS, backend, make_log, no_ram_filesystem
from tests.storage._clock import fake_clock

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)

__all__ = ["BACKENDS", "backend", "fake_clock", "make_log", "no_ram_filesystem"]

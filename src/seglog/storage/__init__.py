"""seglog's storage engine: partition logs of record batches v2 in Kafka's on-disk format.

One :class:`Log` is one partition, a directory of segments (``%020d.log`` + ``.index`` +
``.timeindex``). :class:`DataDir` holds the topics of a broker. See docs/DESIGN.md.
"""

from __future__ import annotations

# Directory tools (klevdb's Check / Recover)
from seglog.storage._check import CheckReport, check, recover, stat

# Logs and their configuration
from seglog.storage._config import AppendInfo, LogConfig
from seglog.storage._datadir import DataDir, TopicInfo, validate_topic_name
from seglog.storage._log import FileSlice, Log, open_log

# Messages (embedded API)
from seglog.storage._message import OFFSET_NEWEST, OFFSET_OLDEST, Message

__all__ = [  # noqa: RUF022  (grouped by topic, as STYLE.md asks)
    # logs and their configuration
    "AppendInfo",
    "FileSlice",
    "Log",
    "LogConfig",
    "open_log",
    # messages (embedded API)
    "Message",
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    # data directories
    "DataDir",
    "TopicInfo",
    "validate_topic_name",
    # directory tools
    "CheckReport",
    "check",
    "recover",
    "stat",
]

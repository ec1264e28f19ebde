"""seglog: a durable, segmented commit log that speaks Kafka's wire protocol.

The embedded API (one ``Log`` is one partition, a directory of segments)::

    import seglog
    with seglog.open_log("data/events", create=True) as log:
        next_offset = log.publish([seglog.Message(key=b"k", value=b"v")])
        next_offset, messages = log.consume(seglog.OFFSET_OLDEST, max_count=1000)

``seglog.memory_log(**config)`` gives the same log in RAM only (a private tmpfs directory,
gone at close or exit).

See ``seglog.storage`` for the engine, ``seglog.broker`` for ``seglog serve`` and
``seglog.spark`` for the PySpark data source ``format("seglog")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog.errors import *  # noqa: F403  (the error hierarchy is part of the public API)
from seglog.errors import __all__ as _errors_all

if TYPE_CHECKING:
    from seglog.storage import (
        OFFSET_NEWEST,
        OFFSET_OLDEST,
        AppendInfo,
        CancelToken,
        DataDir,
        Log,
        LogConfig,
        Message,
        RecordColumns,
        TopicInfo,
        TypedLog,
        TypedMessage,
        memory_log,
        open_log,
        open_typed_log,
    )

_STORAGE_NAMES = frozenset(
    {
        "OFFSET_NEWEST", "OFFSET_OLDEST", "AppendInfo", "CancelToken", "DataDir", "Log",
        "LogConfig", "Message", "RecordColumns", "TopicInfo", "TypedLog", "TypedMessage",
        "memory_log", "open_log", "open_typed_log",
    }
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """The storage names, imported on first use (PEP 562): ``seglog`` itself stays cheap
    to import (the client commands start in a fraction of the time)."""
    if name in _STORAGE_NAMES:
        from seglog import storage  # noqa: PLC0415

        return getattr(storage, name)
    raise AttributeError(f"module 'seglog' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [  # noqa: PLE0604  (errors re-exported from seglog.errors)
    *_errors_all,
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    "AppendInfo",
    "CancelToken",
    "DataDir",
    "Log",
    "LogConfig",
    "Message",
    "RecordColumns",
    "TopicInfo",
    "TypedLog",
    "TypedMessage",
    "__version__",
    "memory_log",
    "open_log",
    "open_typed_log",
]

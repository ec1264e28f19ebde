"""``seglog serve --log-format json``: one JSON object per log line."""

from __future__ import annotations

import datetime as dt
import json
import logging

__all__ = ["JsonFormatter"]

# attributes every LogRecord has; anything else was passed with ``extra=`` and is kept
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """``{"ts": ISO 8601 UTC, "level", "logger", "msg", ...extra fields}``; an exception
    adds ``"exc"`` with its formatted traceback."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value if isinstance(value, str | int | float | bool) else repr(value)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)

"""The loop of the broker's background threads (retention, tiering, Iceberg commits):
one daemon thread that waits ``interval_s`` seconds, runs one pass, and again, until
stopped. A pass that raises is logged (``<what> pass failed`` with the traceback) and
the next one runs on schedule: a background thread never dies of one bad pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["PeriodicThread"]

log = logging.getLogger(__name__)


class PeriodicThread:
    """``body()`` every ``interval_s`` seconds on a daemon thread named ``name``; the first
    pass runs ``interval_s`` after :meth:`start`. Not restartable. Thread-safe
    :meth:`stop` and :attr:`stopping` (a long pass checks it to end early)."""

    def __init__(
        self, name: str, interval_s: float, body: Callable[[], object], *, what: str
    ) -> None:
        self.interval_s = interval_s
        """Seconds between the end of a pass and the start of the next (read each time)."""
        self._body = body
        self._what = what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait for the pass in progress to end; idempotent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._body()
            except Exception:
                log.exception("%s pass failed", self._what)

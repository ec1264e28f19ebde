"""The ``seglog serve`` process: the event loop (uvloop when installed), signals, and a
:class:`~seglog.broker.network.server.Broker` run until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable

from seglog._malloc import tune_malloc
from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.network.server import Broker

__all__ = ["run_broker"]

log = logging.getLogger("seglog.broker")


async def _serve(config: BrokerConfig, on_started: Callable[[], None] | None) -> None:
    loop = asyncio.get_running_loop()
    log.info("event loop: %s", type(loop).__module__.partition(".")[0])  # uvloop / asyncio
    broker = Broker(config)
    # handlers first: a SIGTERM during the start (recovery can take a while) stops the
    # broker cleanly once it has started, instead of killing it mid-recovery
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        raise
    if on_started is not None and not stop.is_set():
        on_started()
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await broker.stop()


def run_broker(config: BrokerConfig, on_started: Callable[[], None] | None = None) -> None:
    """Run a broker until SIGINT or SIGTERM, then shut down cleanly and return;
    ``on_started()`` runs once its listeners accept connections (on the event loop: keep it
    short, e.g. start a thread). Sets glibc's malloc thresholds for the process first
    (``seglog._malloc.tune_malloc``). Raises DataDirLockedError when another process holds
    the data directory, OSError when a listener cannot bind."""
    tune_malloc()
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_serve(config, on_started))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when installed (libuv, and TLS in Cython rather than asyncio's
    pure-Python SSL protocol: benchmarks/security_bench.py), else asyncio's default.
    ``SEGLOG_EVENT_LOOP=asyncio`` forces the default."""
    if os.environ.get("SEGLOG_EVENT_LOOP", "") == "asyncio":
        return None
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:
        return None
    return uvloop.new_event_loop

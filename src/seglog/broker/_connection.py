"""One client connection: size-prefixed frames read into a preallocated buffer
(``asyncio.BufferedProtocol``), requests handled in arrival order, responses written in
request order even when a later request finishes first.

A frame whose size is negative or over ``socket.request.max.bytes`` closes the connection
before anything is allocated for it (as Kafka does); so does a frame that cannot be
decoded (``ProtocolError``), with a warning in the log.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from seglog.errors import ProtocolError

__all__ = ["Connection", "Dispatch"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_BUFFER_BYTES = 256 * 1024  # small requests are parsed out of this buffer
_MIN_FREE = 16 * 1024
_LARGE_FRAME = 64 * 1024  # larger frames are received straight into their own buffer

# dispatch(connection, frame) -> encoded response, None (no response), or an awaitable of
# either; raises ProtocolError to close the connection.
Dispatch = Callable[
    ["Connection", "bytes | bytearray"],
    "bytes | bytearray | Awaitable[bytes | bytearray | None] | None",
]


class Connection(asyncio.BufferedProtocol):
    """Kafka framing and in-order response pipeline for one socket."""

    def __init__(
        self,
        dispatch: Dispatch,
        *,
        max_request_bytes: int,
        max_inflight: int,
        on_close: Callable[[Connection], None],
    ) -> None:
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._max_inflight = max_inflight
        self._on_close = on_close
        self._buf = bytearray(_BUFFER_BYTES)
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received
        self._frame_filled = 0
        self._pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._stopped = False  # no more requests read (shutdown)
        self.peer: Any = None
        self.closed = asyncio.get_running_loop().create_future()

    # -- asyncio protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peer = transport.get_extra_info("peername")

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for fut in self._pending:
            fut.cancel()
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_close(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < _MIN_FREE and self._start > 0:
            n = self._end - self._start
            self._buf[:n] = self._buf[self._start : self._end]
            self._start, self._end = 0, n
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._frame is not None:
                self._frame_filled += nbytes
                if self._frame_filled == len(self._frame):
                    frame, self._frame = self._frame, None
                    self._handle(frame)
                return
            self._end += nbytes
            self._parse_frames()
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
        except Exception:
            log.exception("closing connection from %s: request handling failed", self.peer)
            self.abort()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # -- framing ------------------------------------------------------------------------

    def _parse_frames(self) -> None:
        buf = self._buf
        while self._transport is not None and not self._stopped:
            available = self._end - self._start
            if available < 4:
                break
            (size,) = _SIZE.unpack_from(buf, self._start)
            if size < 0 or size > self._max_request_bytes:
                raise ProtocolError(
                    f"request size {size} outside 0..{self._max_request_bytes}"
                    " (socket.request.max.bytes)"
                )
            if available < 4 + size:
                if size > _LARGE_FRAME:
                    # Receive the rest straight into a buffer of the frame's size (checked
                    # against socket.request.max.bytes above): no copy, no growth.
                    frame = bytearray(size)
                    frame[: available - 4] = buf[self._start + 4 : self._end]
                    self._frame, self._frame_filled = frame, available - 4
                    self._start = self._end = 0
                elif 4 + size > len(buf) - self._start:
                    n = self._end - self._start
                    buf[:n] = buf[self._start : self._end]
                    self._start, self._end = 0, n
                break
            with memoryview(buf) as view:
                frame_bytes = bytes(view[self._start + 4 : self._start + 4 + size])
            self._start += 4 + size
            self._handle(frame_bytes)

    # -- pipeline -----------------------------------------------------------------------

    def _handle(self, frame: bytes | bytearray) -> None:
        result = self._dispatch(self, frame)
        if result is None:
            return
        loop = asyncio.get_running_loop()
        if isinstance(result, bytes | bytearray):
            if not self._pending:
                self._write(result)
                return
            fut: asyncio.Future[Any] = loop.create_future()
            fut.set_result(result)
        else:
            fut = asyncio.ensure_future(result)
        self._pending.append(fut)
        fut.add_done_callback(self._flush)
        self._update_reading()

    def _flush(self, _fut: asyncio.Future[Any] | None = None) -> None:
        while self._pending and self._pending[0].done():
            fut = self._pending.popleft()
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:
                log.error("request from %s failed", self.peer, exc_info=exc)
                self.abort()
                return
            data = fut.result()
            if data is not None:
                self._write(data)
        self._update_reading()

    def _write(self, data: bytes | bytearray) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        want_pause = (
            self._stopped or self._writing_paused or len(self._pending) >= self._max_inflight
        )
        if want_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not want_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    # -- lifecycle ----------------------------------------------------------------------

    def abort(self) -> None:
        """Close at once, dropping queued responses (protocol violation)."""
        if self._transport is not None:
            self._transport.abort()

    async def drain_and_close(self, timeout: float) -> None:
        """Shutdown: read no more requests, wait (up to ``timeout`` s) for in-flight
        responses to be written, then close."""
        self._stopped = True
        self._update_reading()
        pending = list(self._pending)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        if self._transport is not None:
            self._transport.close()
        await asyncio.wait((self.closed,), timeout=timeout)

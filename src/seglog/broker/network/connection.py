"""One client connection: size-prefixed frames received into one reusable, growable
buffer (``asyncio.BufferedProtocol``) and handed to the dispatcher as memoryview slices of
it (no copy), requests handled in arrival order, responses written in request order even
when a later request finishes first.

The buffer starts at 256 KiB once the connection is admitted and grows to fit the
largest frame seen (twice that up to 2 MiB; a frame's size is checked against
``socket.request.max.bytes`` before anything is allocated for it); a buffer over 2 MiB
is dropped again once empty. A frame view is only valid while the
dispatcher runs: anything kept longer must be copied (kafka-python's decoder copies,
``Log.append`` copies).

A frame whose size is negative or over ``socket.request.max.bytes`` closes the connection
(as Kafka does); so does a frame that cannot be decoded (``ProtocolError``), with a
warning in the log. Back-pressure: reading stops while ``max_inflight`` responses are
pending (Kafka's ``queued.max.requests``, per connection here) or the transport's write
buffer is full, and resumes when they drain. A quota throttle mutes the connection
(:meth:`Connection.mute`): no request is read or parsed from it for the throttle time,
while responses already due are still written (Kafka's SocketServer after KIP-219).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from seglog.broker.config.listeners import Listener
from seglog.broker.protocol.framing import FRAME_SIZE
from seglog.broker.security.session import Session
from seglog.errors import ProtocolError

__all__ = ["Connection", "Dispatch", "Response"]

log = logging.getLogger(__name__)

_BUFFER_BYTES = 32 * 1024  # initial receive buffer (grows for large frames; bounds idle memory)
_KEEP_BYTES = 2 * 1024 * 1024 + 64 * 1024  # larger buffers are dropped once empty
_MIN_FREE = 16 * 1024  # move a small partial frame to the front below this much room

Response = bytes | bytearray | list[bytes | bytearray | memoryview]
"""An encoded response frame, whole or in pieces written in order (record bytes as read)."""

# dispatch(connection, frame) -> encoded response, None (no response), or a future /
# awaitable of either; raises ProtocolError to close the connection.
Dispatch = Callable[["Connection", memoryview], "Response | Awaitable[Response | None] | None"]


class Connection(asyncio.BufferedProtocol):
    """Kafka framing and in-order response pipeline for one socket.

    ``on_open(conn)`` runs when the socket is accepted and returns False to refuse it
    (connection limits); ``on_close(conn)`` runs when it is gone. ``last_active`` is the
    loop time of the last byte received or response written (idle timeout)."""

    def __init__(
        self,
        dispatch: Dispatch,
        *,
        max_request_bytes: int,
        max_inflight: int,
        on_open: Callable[[Connection], bool],
        on_close: Callable[[Connection], None],
        listener: Listener,
    ) -> None:
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._max_inflight = max_inflight
        self._on_open = on_open
        self._on_close = on_close
        self._close_hooks: list[Callable[[], None]] = []
        self._buf = bytearray()  # allocated once the connection is admitted
        self._start = 0  # first byte not yet parsed
        self._end = 0  # end of received bytes
        self._pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._stopped = False  # no more requests read (shutdown)
        self._loop = asyncio.get_running_loop()
        self.accepted = False  # on_open said yes (counted in the connection limits)
        self.peer: Any = None
        self.last_active = self._loop.time()
        self.listener = listener
        """The listener it arrived on."""
        self.session = Session(authenticated=not listener.sasl)
        """Its principal and SASL state (the SASL APIs move it on)."""
        self.partial_timeout_s = 0.0  # a started request must arrive whole in this time (0: off)
        self._partial_timer: asyncio.TimerHandle | None = None
        self._muted_until = 0.0  # loop time until which nothing is read (quota throttle)
        self._mute_timer: asyncio.TimerHandle | None = None
        self.closed = self._loop.create_future()

    @property
    def peer_host(self) -> str:
        """The client's IP address ("" when unknown)."""
        return str(self.peer[0]) if isinstance(self.peer, tuple) and self.peer else ""

    @property
    def busy(self) -> bool:
        """Requests are in flight (a long poll or an fsync wait is not idleness), or a
        throttle mutes it."""
        return bool(self._pending) or self.muted

    @property
    def muted(self) -> bool:
        """A quota throttle holds reading (:meth:`mute`)."""
        return self._muted_until > self._loop.time()

    def mute(self, ms: int) -> None:
        """Read nothing from this connection for ``ms`` ms (a quota throttle; a longer
        mute already running is kept). Responses already due are still written."""
        if ms <= 0 or self._transport is None:
            return
        until = self._loop.time() + ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._mute_timer = self._loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        # the timer of the latest mute (a longer one reschedules it); a loop clock of ms
        # granularity (uvloop) may run it a fraction early: the mute ends here regardless
        self._mute_timer = None
        self._muted_until = 0.0
        self._update_reading()

    # -- asyncio protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's does not derive from asyncio.Transport)
        transport = cast("asyncio.Transport", transport)
        self._transport = transport
        self.peer = transport.get_extra_info("peername")
        if not self._on_open(self):
            transport.abort()
            return
        self.accepted = True
        self._buf = bytearray(_BUFFER_BYTES)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._partial_timer is not None:
            self._partial_timer.cancel()
            self._partial_timer = None
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None
        for fut in self._pending:
            fut.cancel()
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_close(self)
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("a close hook of the connection from %s failed", self.peer)

    def on_closed(self, hook: Callable[[], None]) -> None:
        """Run ``hook()`` (on the event loop) once the connection is gone; at once when it
        is gone already. What a handler ties to the connection that made it (a share
        session: Kafka releases its records when that connection closes)."""
        if self.closed.done():
            hook()
        else:
            self._close_hooks.append(hook)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._end == len(self._buf):  # full: only when a partial frame header sits there
            self._compact()
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        self.last_active = self._loop.time()
        self._parse_buffered()
        self._watch_partial()

    def _watch_partial(self) -> None:
        """Arm a deadline while part of a request is buffered (a client that sends a few
        bytes and stalls must not hold a connection slot and its buffer forever)."""
        partial = self._end > self._start and self._transport is not None
        if partial and self._partial_timer is None and self.partial_timeout_s > 0:
            self._partial_timer = self._loop.call_later(
                self.partial_timeout_s, self._partial_expired
            )
        elif not partial and self._partial_timer is not None:
            self._partial_timer.cancel()
            self._partial_timer = None

    def _partial_expired(self) -> None:
        self._partial_timer = None
        if self.muted:  # not reading is the broker's doing: wait for the mute to end
            self._watch_partial()
            return
        if self._end > self._start and self._transport is not None:
            log.warning(
                "closing connection from %s: a request started %.1f s ago is still incomplete",
                self.peer,
                self.partial_timeout_s,
            )
            self.abort()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # -- framing ------------------------------------------------------------------------

    def _compact(self) -> None:
        """Move the unparsed bytes to the front of the buffer (in place: frame views
        handed out earlier are dead by now, so overwriting is safe)."""
        n = self._end - self._start
        if self._start:
            self._buf[:n] = self._buf[self._start : self._end]
        self._start, self._end = 0, n

    def _parse_frames(self) -> None:
        while (
            self._transport is not None
            and not self._stopped
            and len(self._pending) < self._max_inflight
            and not self.muted
        ):
            buf, start = self._buf, self._start
            available = self._end - start
            if available < 4:
                if len(buf) - start < 4:
                    self._compact()
                break
            (size,) = FRAME_SIZE.unpack_from(buf, start)
            if size < 0 or size > self._max_request_bytes:
                raise ProtocolError(
                    f"request size {size} outside 0..{self._max_request_bytes}"
                    " (socket.request.max.bytes)"
                )
            need = 4 + size
            if available < need:
                if need > len(buf):
                    # grow to fit the whole frame (size checked above): one copy of the
                    # part received so far, then the rest lands in place; room for two
                    # such frames while that stays a kept size, so a pipelining producer
                    # rarely needs a partial frame moved to the front
                    bigger = bytearray(2 * need if 2 * need <= _KEEP_BYTES else need)
                    bigger[:available] = buf[start : self._end]
                    self._buf, self._start, self._end = bigger, 0, available
                elif len(buf) - start < need or (
                    len(buf) - self._end < _MIN_FREE and available < _MIN_FREE
                ):
                    self._compact()
                break
            self._start = start + need
            frame = memoryview(buf)[start + 4 : start + need]
            self._handle(frame)
        if self._start == self._end:
            self._start = self._end = 0
            if len(self._buf) > _KEEP_BYTES:
                self._buf = bytearray(_BUFFER_BYTES)

    # -- pipeline -----------------------------------------------------------------------

    def _handle(self, frame: memoryview) -> None:
        result = self._dispatch(self, frame)
        if result is None:
            return
        if isinstance(result, bytes | bytearray | list):
            if not self._pending:
                self._write(result)
                return
            fut: asyncio.Future[Any] = self._loop.create_future()
            fut.set_result(result)
        elif isinstance(result, asyncio.Future):
            fut = result
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

    def _write(self, data: Response) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if isinstance(data, list):
                # one write per piece: the socket takes the record bytes straight from
                # the pread result (asyncio copies only what the socket cannot take now)
                for piece in data:
                    transport.write(piece)
            else:
                transport.write(data)
            self.last_active = self._loop.time()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        want_pause = (
            self._stopped
            or self._writing_paused
            or len(self._pending) >= self._max_inflight
            or self.muted
        )
        if want_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not want_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False
            if self._end > self._start:
                self._parse_buffered()

    def _parse_buffered(self) -> None:
        """Parse frames that arrived while too many requests were in flight."""
        try:
            self._parse_frames()
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
        except Exception:
            log.exception("closing connection from %s: request handling failed", self.peer)
            self.abort()

    # -- lifecycle ----------------------------------------------------------------------

    def peer_certificate(self) -> Any:
        """The TLS client certificate (``SSLObject.getpeercert()``), None without one."""
        if self._transport is None:
            return None
        return self._transport.get_extra_info("peercert")

    def abort(self) -> None:
        """Close at once, dropping queued responses (protocol violation)."""
        if self._transport is not None:
            self._transport.abort()

    def close_idle(self) -> None:
        """Close an idle connection (``connections.max.idle.ms``): nothing is pending."""
        if self._transport is not None:
            self._transport.close()

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

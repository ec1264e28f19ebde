"""Measuring clients against their quotas and saying how long to throttle them (Kafka's
``ClientQuotaManager``, ``ClientRequestQuotaManager``, ``ControllerMutationQuotaManager``
and ``ConnectionQuotas``; KIP-13, KIP-124, KIP-219, KIP-599, KIP-612).

A rate is Kafka's sampled ``Rate``: ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s) each; a sample older than all of them together is
dropped; the rate is the samples' total over the time since the oldest one began. One
deliberate difference: that time is at least ONE window, where Kafka pads it to ``num - 1``
windows. Kafka's padding lets a new (or long idle) client put a whole window's worth
(10 s x the quota) into its first sample; when that sample expires 11 s later the rate
drops by all of it and the burst comes again, forever: simulated at 1 MB/s with
back-to-back 16 KiB requests, 10-s throughputs ranged 0.14-1.10 MB/s; with a one-window
floor, 0.94-1.01 MB/s (1 MiB requests: 0.90-1.10).

A value is recorded first; if the rate is then above the bound, the client is throttled
for ``(rate - bound) / bound * window`` ms: the time until the rate is back
at the bound if it sends nothing more (Kafka's ``QuotaUtils.throttleTime``). Request time
and mutation throttles are capped at one window (Kafka's ``boundedThrottleTime``).

Nothing is dropped: the handler answers with the throttle in ``throttle_time_ms`` and the
connection stops reading for that long (KIP-219). A sensor is kept per quota kind and
sharing entity (:class:`~seglog.broker.security.client_quotas.Resolved`) and forgotten
after an hour without traffic, as Kafka expires its quota sensors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from seglog.broker.security.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaStore,
)

__all__ = ["ConnectionRates", "QuotaManager", "SampledRate", "SensorStats"]

_SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka's inactive quota sensors expire after an hour


class SampledRate:
    """Kafka's ``Rate`` over a ``SampledStat``: ``num`` samples of ``window_ms`` each.
    Values are per second (``record(bytes)`` → bytes/s)."""

    __slots__ = ("_current", "_num", "_starts", "_values", "_window_ms")

    def __init__(self, num: int, window_ms: int) -> None:
        self._num = num
        self._window_ms = window_ms
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = -1

    def record(self, value: float, now_ms: float) -> None:
        """Add ``value`` to the current sample (a new one once it is a window old)."""
        self._purge(now_ms)
        if self._current < 0 or now_ms >= self._starts[self._current] + self._window_ms:
            if len(self._starts) < self._num:
                self._starts.append(now_ms)
                self._values.append(0.0)
                self._current = len(self._starts) - 1
            else:
                self._current = (self._current + 1) % self._num
                self._starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def _purge(self, now_ms: float) -> None:
        expiry = self._num * self._window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expiry:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_ms(self, now_ms: float) -> float:
        """The time the rate is measured over, in ms: since the oldest live sample
        began, at least one window (see the module doc)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts, default=now_ms)
        return max(elapsed, float(self._window_ms))

    def total(self, now_ms: float) -> float:
        """The live samples' total."""
        self._purge(now_ms)
        return sum(self._values)

    def measure(self, now_ms: float) -> float:
        """The rate, per second."""
        return self.total(now_ms) * 1000.0 / self.window_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: float) -> int:
        """How long to throttle so the rate falls back to ``bound`` (0: within it)."""
        rate = self.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.window_ms(now_ms))


@dataclasses.dataclass
class SensorStats:
    """One quota entity's sensor (metrics): its rate, bound and throttling so far."""

    rate: SampledRate
    bound: float = math.inf
    total: float = 0.0
    """Everything recorded (bytes, ms of request time, mutations)."""
    throttle_ms_total: int = 0
    throttled: int = 0
    """Responses throttled."""
    last_ms: float = 0.0


SensorKey = tuple[str, str, str]
"""(quota key, user tag, client-id tag)."""


class QuotaManager:
    """The client quotas' sensors. ``clock()`` is milliseconds (monotonic). Every
    ``record_*`` method returns the throttle time in ms (0: within the quota, or none
    applies)."""

    def __init__(
        self, store: QuotaStore, *, window_num: int, window_seconds: int, clock: Callable[[], float]
    ) -> None:
        self.store = store
        self._num = window_num
        self._window_ms = window_seconds * 1000
        self._clock = clock
        self.sensors: dict[SensorKey, SensorStats] = {}

    def now_ms(self) -> float:
        """The sensors' clock, in ms."""
        return self._clock()

    def _record(self, key: str, user: str, client_id: str, value: float, cap: int | None) -> int:
        resolved = self.store.resolve(key, user, client_id)
        if resolved is None:
            return 0
        skey = (key, resolved.user, resolved.client_id)
        sensor = self.sensors.get(skey)
        if sensor is None:
            sensor = SensorStats(SampledRate(self._num, self._window_ms))
            self.sensors[skey] = sensor
        now = self._clock()
        sensor.bound = resolved.bound
        sensor.last_ms = now
        sensor.rate.record(value, now)
        sensor.total += value
        throttle = sensor.rate.throttle_ms(resolved.bound, now)
        if cap is not None:
            throttle = min(throttle, cap)
        if throttle > 0:
            sensor.throttled += 1
            sensor.throttle_ms_total += throttle
        return throttle

    def record_produce(self, user: str, client_id: str, nbytes: int) -> int:
        """A produce request of ``nbytes`` (the whole request) against producer_byte_rate."""
        return self._record(PRODUCER_BYTE_RATE, user, client_id, nbytes, None)

    def record_fetch(self, user: str, client_id: str, nbytes: int) -> int:
        """A fetch response of ``nbytes`` against consumer_byte_rate."""
        return self._record(CONSUMER_BYTE_RATE, user, client_id, nbytes, None)

    def fetch_cap(self, user: str, client_id: str) -> int | None:
        """The most bytes one fetch response may hold for this client: what its
        consumer_byte_rate allows in one window (Kafka caps a fetch at its
        ``getMaxValueInQuotaWindow``, so a throttled fetch can ever be answered); None
        without a quota."""
        resolved = self.store.resolve(CONSUMER_BYTE_RATE, user, client_id)
        if resolved is None:
            return None
        return max(1, int(resolved.bound * self._window_ms / 1000))

    def unrecord_fetch(self, user: str, client_id: str, nbytes: int) -> None:
        """Take back a fetch response that is not sent (a throttled fetch is answered
        empty, as Kafka's ``unrecordQuotaSensor``)."""
        resolved = self.store.resolve(CONSUMER_BYTE_RATE, user, client_id)
        if resolved is None:
            return
        sensor = self.sensors.get((CONSUMER_BYTE_RATE, resolved.user, resolved.client_id))
        if sensor is not None:
            sensor.rate.record(-nbytes, self._clock())
            sensor.total -= nbytes

    def record_request_time(self, user: str, client_id: str, ms: float) -> int:
        """Time spent handling a request, against request_percentage (percent of one
        thread: 100 = one whole second per second)."""
        if ms <= 0:
            return 0
        return self._record(REQUEST_PERCENTAGE, user, client_id, ms / 10.0, self._window_ms)

    def mutation_exceeded(self, user: str, client_id: str) -> int:
        """Before a mutation (KIP-599 strict mode): the throttle in ms when the client's
        controller_mutation_rate is already above its bound, else 0."""
        resolved = self.store.resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if resolved is None:
            return 0
        sensor = self.sensors.get((CONTROLLER_MUTATION_RATE, resolved.user, resolved.client_id))
        if sensor is None:
            return 0
        return min(sensor.rate.throttle_ms(resolved.bound, self._clock()), self._window_ms)

    def record_mutations(self, user: str, client_id: str, count: int) -> int:
        """``count`` partition mutations (topics created or deleted count their partitions,
        CreatePartitions the partitions added) against controller_mutation_rate."""
        if count <= 0:
            return 0
        return self._record(CONTROLLER_MUTATION_RATE, user, client_id, count, self._window_ms)

    def expire(self) -> None:
        """Forget sensors idle for an hour."""
        now = self._clock()
        for key in [k for k, s in self.sensors.items() if now - s.last_ms > _SENSOR_EXPIRY_MS]:
            del self.sensors[key]


class ConnectionRates:
    """KIP-612 connection creation rates: broker-wide (``max.connection.creation.rate``)
    and per IP (``connection_creation_rate`` quotas of ip entities)."""

    def __init__(
        self,
        store: QuotaStore,
        broker_rate: int,
        *,
        window_num: int,
        window_seconds: int,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.broker_rate = broker_rate
        self._num = window_num
        self._window_ms = window_seconds * 1000
        self._clock = clock
        self._broker = SampledRate(window_num, self._window_ms)
        self._per_ip: dict[str, tuple[SampledRate, float]] = {}
        self.ip_throttled_until: dict[str, float] = {}
        """Addresses whose new connections are closed until then (ms)."""

    def ip_throttle_ms(self, host: str) -> int:
        """A new connection from ``host``: recorded against its connection_creation_rate;
        > 0 when it exceeds it (Kafka closes such a connection at once and closes the
        address's new connections for that long)."""
        now = self._clock()
        until = self.ip_throttled_until.get(host)
        if until is not None:
            if now < until:
                return int(until - now)
            del self.ip_throttled_until[host]
        bound = self.store.ip_rate(host)
        if bound is None:
            self._per_ip.pop(host, None)
            return 0
        entry = self._per_ip.get(host)
        rate = entry[0] if entry is not None else SampledRate(self._num, self._window_ms)
        self._per_ip[host] = (rate, now)
        rate.record(1, now)
        throttle = rate.throttle_ms(bound, now)
        if throttle > 0:
            self.ip_throttled_until[host] = now + throttle
        if len(self._per_ip) > 10_000:  # addresses gone quiet: forget them
            old = now - self._num * self._window_ms
            self._per_ip = {h: e for h, e in self._per_ip.items() if e[1] > old}
        return throttle

    def broker_delay_ms(self) -> int:
        """A new connection against ``max.connection.creation.rate``: how long to hold
        it before reading from it (Kafka's acceptor waits that long)."""
        if self.broker_rate >= 2**31 - 1:
            return 0
        now = self._clock()
        self._broker.record(1, now)
        return self._broker.throttle_ms(self.broker_rate, now)

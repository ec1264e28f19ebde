"""What the console shows, read from any Kafka-protocol broker with its clients:
confluent-kafka's AdminClient (topics, offsets, configs, groups, lag) and Consumer (the
message browser), kafka-python's admin client for DescribeLogDirs (sizes on disk).

Every call is blocking (the web layer runs them in a thread pool) and read-only. A
:class:`Throughput` sampler thread sums the log end offsets (records in) and the committed
offsets of every group (records consumed) once a second; the overview chart shows their
per-second differences over the last minutes.
"""

from __future__ import annotations

import base64
import collections
import json
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Backend", "Throughput", "render_bytes"]

TIMEOUT = 15.0


def render_bytes(data: bytes | None, fmt: str) -> str | None:
    """``data`` as ``json`` (pretty, when it parses), ``text`` (UTF-8, else hex) or
    ``hex``; None stays None (a null key or a tombstone)."""
    if data is None:
        return None
    if fmt == "hex":
        return data.hex(" ")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data.hex(" ")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=True)
        except ValueError:
            return text
    return text


class Backend:
    """Blocking reads against the brokers of ``conf`` (librdkafka configuration)."""

    def __init__(self, conf: dict[str, Any], broker_started_s: float | None = None) -> None:
        """``broker_started_s``: the broker's start (epoch seconds) when the console runs in
        its process (``seglog serve --console-listen``); Kafka's protocol has no uptime, so
        against another broker the overview shows the console's own uptime instead."""
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        self.conf = conf
        self.admin = AdminClient({**conf, "allow.auto.create.topics": False})
        self.started = time.time()
        self.broker_started_s = broker_started_s

    # -- cluster and topics -------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """Cluster id, controller, brokers, topic and partition counts, disk use."""
        meta = self.admin.list_topics(timeout=TIMEOUT)
        sizes = self.log_dir_sizes()
        return {
            "cluster_id": meta.cluster_id,
            "controller_id": meta.controller_id,
            "brokers": [
                {"node_id": b.id, "host": b.host, "port": b.port}
                for b in sorted(meta.brokers.values(), key=lambda b: b.id)
            ],
            "topics": len(meta.topics),
            "partitions": sum(len(t.partitions) for t in meta.topics.values()),
            "disk_bytes": None if sizes is None else sum(sizes.values()),
            "console_uptime_s": round(time.time() - self.started, 1),
            "broker_uptime_s": None
            if self.broker_started_s is None
            else round(time.time() - self.broker_started_s, 1),
        }

    def log_dir_sizes(self) -> dict[tuple[str, int], int] | None:
        """Partition sizes in bytes from DescribeLogDirs (None when the broker or the
        security options do not allow it)."""
        if any(k.startswith(("sasl.", "ssl.", "security.")) for k in self.conf):
            return None  # kafka-python would need the options translated: not offered
        from kafka.admin import KafkaAdminClient  # noqa: PLC0415

        try:
            client = KafkaAdminClient(bootstrap_servers=self.conf["bootstrap.servers"])
            try:
                dirs = client.describe_log_dirs()
            finally:
                client.close()
        except Exception:
            return None
        sizes: dict[tuple[str, int], int] = {}
        for broker in dirs:
            for log_dir in broker.get("log_dirs", []):
                for t in log_dir.get("topics", []):
                    for p in t.get("partitions", []):
                        sizes[(t["name"], p["partition_index"])] = p["partition_size"]
        return sizes

    def _offsets(self, keys: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition  # noqa: PLC0415

        if not keys:
            return {}
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in keys}, request_timeout=TIMEOUT
        )
        return {(tp.topic, tp.partition): f.result(TIMEOUT).offset for tp, f in futures.items()}

    def topics(self) -> list[dict[str, Any]]:
        """Every topic: partitions, records (log end - log start), bytes."""
        from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

        meta = self.admin.list_topics(timeout=TIMEOUT)
        keys = [(n, p) for n, t in meta.topics.items() for p in t.partitions]
        starts = self._offsets(keys, OffsetSpec.earliest())
        ends = self._offsets(keys, OffsetSpec.latest())
        sizes = self.log_dir_sizes() or {}
        out = []
        for name, t in sorted(meta.topics.items()):
            parts = sorted(t.partitions)
            out.append(
                {
                    "topic": name,
                    "partitions": len(parts),
                    "records": sum(ends[(name, p)] - starts[(name, p)] for p in parts),
                    "bytes": sum(sizes.get((name, p), 0) for p in parts) if sizes else None,
                }
            )
        return out

    def topic(self, name: str) -> dict[str, Any]:
        """One topic: per partition leader, log start/end offsets, size; its configs."""
        from confluent_kafka.admin import ConfigResource, OffsetSpec  # noqa: PLC0415

        meta = self.admin.list_topics(name, timeout=TIMEOUT).topics.get(name)
        if meta is None or meta.error is not None:
            raise KeyError(name)
        parts = sorted(meta.partitions)
        keys = [(name, p) for p in parts]
        starts = self._offsets(keys, OffsetSpec.earliest())
        ends = self._offsets(keys, OffsetSpec.latest())
        sizes = self.log_dir_sizes() or {}
        configs: dict[str, Any] = {}
        try:
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            entries = self.admin.describe_configs([res])[res].result(TIMEOUT)
            configs = {k: e.value for k, e in sorted(entries.items())}
        except Exception:
            configs = {}
        return {
            "topic": name,
            "partitions": [
                {
                    "partition": p,
                    "leader": meta.partitions[p].leader,
                    "log_start_offset": starts[(name, p)],
                    "log_end_offset": ends[(name, p)],
                    "bytes": sizes.get((name, p)),
                }
                for p in parts
            ],
            "configs": configs,
        }

    # -- messages -----------------------------------------------------------------------

    def messages(  # noqa: PLR0917 (the browser's query)
        self,
        topic: str,
        partition: int,
        offset: int | None,
        timestamp_ms: int | None,
        limit: int,
        fmt: str,
    ) -> dict[str, Any]:
        """Up to ``limit`` records of one partition from ``offset`` (None with no
        timestamp: the last ``limit``), or from the first record at or after
        ``timestamp_ms``; rendered as ``fmt``."""
        from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415
        from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

        key = (topic, partition)
        start = self._offsets([key], OffsetSpec.earliest())[key]
        end = self._offsets([key], OffsetSpec.latest())[key]
        if timestamp_ms is not None:
            found = self._offsets([key], OffsetSpec.for_timestamp(timestamp_ms))[key]
            offset = end if found < 0 else found
        if offset is None:
            offset = max(start, end - limit)
        offset = min(max(offset, start), end)
        records: list[dict[str, Any]] = []
        if offset < end:
            consumer = Consumer(
                {
                    **self.conf,
                    "group.id": "seglog-console",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                }
            )
            try:
                consumer.assign([TopicPartition(topic, partition, offset)])
                deadline = time.monotonic() + TIMEOUT
                while len(records) < limit and time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is None:
                        continue
                    if msg.error() is not None:
                        break  # end of partition (or an error): show what was read
                    records.append(
                        {
                            "offset": msg.offset(),
                            "timestamp": msg.timestamp()[1],
                            "key": render_bytes(msg.key(), fmt),
                            "value": render_bytes(msg.value(), fmt),
                            "value_base64": None
                            if msg.value() is None
                            else base64.b64encode(msg.value()).decode(),
                            "headers": [
                                [k, render_bytes(v, "text")] for k, v in msg.headers() or []
                            ],
                        }
                    )
                    if msg.offset() + 1 >= end:
                        break
            finally:
                consumer.close()
        return {
            "topic": topic,
            "partition": partition,
            "log_start_offset": start,
            "log_end_offset": end,
            "offset": offset,
            "records": records,
        }

    # -- groups -------------------------------------------------------------------------

    def _wire_security(self) -> Any:
        """``ClientSecurity`` of seglog's wire client for this configuration, None when
        that client does not support it (share groups are then not shown)."""
        from seglog.broker import wire_security  # noqa: PLC0415

        try:
            return wire_security(self.conf)
        except Exception:  # the admin client reports bad options on its own
            return None

    def _share_groups(self) -> dict[str, str]:
        """group id -> state of every share group (ListGroups over the wire client:
        confluent-kafka does not list them); empty when they cannot be read."""
        from seglog.broker import ShareAdminError, list_share_groups  # noqa: PLC0415

        security = self._wire_security()
        if security is None:
            return {}
        brokers = self.admin.list_topics(timeout=TIMEOUT).brokers.values()
        try:
            return list_share_groups(
                sorted((b.host, b.port) for b in brokers), timeout_s=TIMEOUT, security=security
            )
        except (ShareAdminError, OSError):
            return {}

    def groups(self) -> list[dict[str, Any]]:
        """Every group with its type (``classic``, ``consumer``, ``share``; ``unknown``
        from a broker that does not say) and state."""
        result = self.admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        rows = {
            g.group_id: {
                "group": g.group_id,
                "type": str(getattr(g.type, "name", g.type)).lower(),
                "state": str(getattr(g.state, "name", g.state)),
            }
            for g in result.valid
        }
        for gid, state in self._share_groups().items():
            rows[gid] = {"group": gid, "type": "share", "state": state.upper()}
        return sorted(rows.values(), key=lambda r: r["group"])

    def _share_group(self, group_id: str) -> dict[str, Any] | None:
        """A share group's members and per partition its share-partition start offset,
        log end offset and lag (log end - start); None when it is not one."""
        from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

        from seglog.broker import (  # noqa: PLC0415
            ShareAdminError,
            describe_share_group,
            split_host_port,
        )

        security = self._wire_security()
        if security is None:
            return None
        bootstrap = split_host_port(str(self.conf["bootstrap.servers"]).split(",")[0].strip())
        try:
            info = describe_share_group(bootstrap, group_id, timeout_s=TIMEOUT, security=security)
        except (ShareAdminError, OSError):
            return None
        if info is None:
            return None
        ends = self._offsets(sorted(info.start_offsets), OffsetSpec.latest())
        return {
            "group": group_id,
            "type": "share",
            "state": info.state.upper(),
            "members": [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "assignment": [f"{t}-{p}" for t, p in m.assignment],
                }
                for m in info.members
            ],
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "start_offset": start,
                    "log_end_offset": ends[(t, p)],
                    "lag": max(ends[(t, p)] - start, 0),
                }
                for (t, p), start in sorted(info.start_offsets.items())
            ],
        }

    def group(self, group_id: str) -> dict[str, Any]:
        """Type, state, members with assignments, and per partition the committed offset
        (a share group: ``start_offset``, the share-partition start offset), the log end
        offset and the lag (log end - committed or start)."""
        from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: PLC0415
        from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

        share = self._share_group(group_id)
        if share is not None:
            return share
        desc = self.admin.describe_consumer_groups([group_id], request_timeout=TIMEOUT)[
            group_id
        ].result(TIMEOUT)
        members = []
        for m in desc.members:
            parts = m.assignment.topic_partitions if m.assignment else []
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "assignment": sorted(f"{tp.topic}-{tp.partition}" for tp in parts),
                }
            )
        listed = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in listed[group_id].result(TIMEOUT).topic_partitions
            if tp.offset >= 0
        }
        ends = self._offsets(sorted(committed), OffsetSpec.latest())
        return {
            "group": group_id,
            "type": str(getattr(getattr(desc, "type", None), "name", "unknown")).lower(),
            "state": str(getattr(desc.state, "name", desc.state)),
            "members": members,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "committed_offset": off,
                    "log_end_offset": ends[(t, p)],
                    "lag": max(ends[(t, p)] - off, 0),
                }
                for (t, p), off in sorted(committed.items())
            ],
        }

    # -- transactions -------------------------------------------------------------------

    def transactions(self) -> list[dict[str, Any]]:
        """Every transaction in flight (Ongoing, PrepareCommit, PrepareAbort) of every
        broker, with its producer, timeout, start time (ms since the epoch) and partitions:
        ListTransactions then DescribeTransactions (KIP-664) over seglog's wire client
        (confluent-kafka has no such admin call); empty when a broker does not serve them."""
        from kafka.protocol.admin import (  # noqa: PLC0415
            DescribeTransactionsRequest,
            ListTransactionsRequest,
        )

        from seglog.broker import KafkaConnection  # noqa: PLC0415

        security = self._wire_security()
        if security is None:
            return []
        brokers = self.admin.list_topics(timeout=TIMEOUT).brokers.values()
        live = ["Ongoing", "PrepareCommit", "PrepareAbort"]
        rows: list[dict[str, Any]] = []
        for host, port in sorted((b.host, b.port) for b in brokers):
            try:
                with KafkaConnection(host, port, "seglog-console", TIMEOUT, security) as conn:
                    listed = conn.call(
                        ListTransactionsRequest[0](state_filters=live, producer_id_filters=[])
                    )
                    ids = [t.transactional_id for t in listed.transaction_states]
                    if not ids:
                        continue
                    described = conn.call(DescribeTransactionsRequest[0](transactional_ids=ids))
            except Exception:  # an older broker closes on unknown APIs: nothing to show
                continue
            for t in described.transaction_states:
                if t.error_code:
                    continue
                rows.append({
                    "transactional_id": t.transactional_id, "state": t.transaction_state,
                    "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
                    "timeout_ms": t.transaction_timeout_ms,
                    "start_time_ms": t.transaction_start_time_ms,
                    "partitions": [f"{p.topic}-{i}" for p in t.topics for i in p.partitions],
                })  # fmt: skip
        return sorted(rows, key=lambda r: r["transactional_id"])

    def totals(self) -> tuple[int, int]:
        """(sum of log end offsets, sum of committed offsets of every group; share groups,
        which commit none, are left out)."""
        from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

        meta = self.admin.list_topics(timeout=TIMEOUT)
        keys = [(n, p) for n, t in meta.topics.items() for p in t.partitions]
        produced = sum(self._offsets(keys, OffsetSpec.latest()).values())
        consumed = 0
        for g in self.groups():
            if g["type"] == "share":
                continue
            consumed += sum(p["committed_offset"] for p in self.group(g["group"])["partitions"])
        return produced, consumed


class Throughput:
    """Records in (log end offsets) and consumed (committed offsets) per second, sampled
    every ``interval_s`` by a daemon thread; the last ``keep`` samples."""

    def __init__(
        self, backend: Callable[[], Backend | None], interval_s: float = 1.0, keep: int = 300
    ) -> None:
        self.backend = backend  # the reader to sample with (None: nobody logged in yet)
        self.interval_s = interval_s
        self.samples: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=keep)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="seglog-console-sampler", daemon=True
        )

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (waits for the thread)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        last: tuple[float, int, int] | None = None
        while not self._stop.is_set():
            try:
                reader = self.backend()
                if reader is None:
                    raise LookupError("no broker login yet")
                produced, consumed = reader.totals()
            except Exception:
                last = None
            else:
                now = time.time()
                if last is not None:
                    dt = max(now - last[0], 1e-3)
                    self.samples.append(
                        (now, max(produced - last[1], 0) / dt, max(consumed - last[2], 0) / dt)
                    )
                last = (now, produced, consumed)
            self._stop.wait(self.interval_s)

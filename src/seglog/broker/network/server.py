"""The broker: listeners, connection admission and limits, request dispatch, startup and
clean shutdown (the composition root of the broker's services)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from prometheus_client import start_http_server

from seglog.broker.apis.registry import REGISTRY, api_versions_body, flexible_request
from seglog.broker.apis.sasl import check_session
from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.config.listeners import Listener, configured_listeners
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.classic_members import ClassicMemberCoordinator
from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.groups import GroupCoordinator
from seglog.broker.coordinator.share_groups import ShareGroupCoordinator
from seglog.broker.coordinator.share_sessions import ShareSessionCache
from seglog.broker.coordinator.share_state import ShareGroupState
from seglog.broker.coordinator.transactions import TransactionCoordinator
from seglog.broker.log.cluster_state import BrokerState
from seglog.broker.log.durability import DurabilityWaiters
from seglog.broker.log.iceberg_commits import IcebergTask
from seglog.broker.log.internal_topics import INTERNAL_TOPIC_CONFIGS, SCHEMAS_TOPIC
from seglog.broker.log.producer_recovery import rebuild, write_snapshot
from seglog.broker.log.producers import ProducerStateTable
from seglog.broker.log.retention import RetentionTask, start_retention
from seglog.broker.log.schema_validation import validation_map
from seglog.broker.log.tiering import TieringTask, remote_storage, start_tiering
from seglog.broker.log.topics import TopicManager
from seglog.broker.metrics import snapshot_from_loop
from seglog.broker.network.admission import ConnectionLimits
from seglog.broker.network.connection import Connection, Response
from seglog.broker.protocol.api_keys import ApiKey, api_name
from seglog.broker.protocol.bounds import check_array_counts
from seglog.broker.protocol.errors import UNSUPPORTED_VERSION
from seglog.broker.protocol.framing import encode_response, parse_request_header
from seglog.broker.protocol.nulls import reject_nulls
from seglog.broker.protocol.throttle_field import raise_throttle
from seglog.broker.schema_registry.service import RegistryServer, registry_server
from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.client_quotas import QuotaStore
from seglog.broker.security.scram_store import CredentialStore
from seglog.broker.security.throttling import ConnectionRates, QuotaManager
from seglog.broker.security.tls import principal_from_cert, server_context
from seglog.errors import ProtocolError, SeglogError
from seglog.iceberg import catalog_properties, iceberg_mode, remote_warehouse
from seglog.schemas import Registry
from seglog.storage import DataDir, LogConfig, RemotePartition, TopicInfo

__all__ = ["Broker"]

log = logging.getLogger("seglog.broker")

_SNAPSHOT_INTERVAL_S = 60.0


def _advertised_host(host: str) -> str:
    """The host clients are given for a listener bound to ``host``: itself, or this
    machine's name for a wildcard bind (Kafka's default advertised listener)."""
    return socket.getfqdn() if host in ("", "0.0.0.0", "::") else host


def _tls_context(config: BrokerConfig) -> ssl.SSLContext:
    if config.ssl_certfile is None:
        raise ValueError("an SSL or SASL_SSL listener needs --ssl-certfile (and --ssl-keyfile)")
    return server_context(
        config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile, config.ssl_client_auth
    )


def _log_config(config: BrokerConfig) -> LogConfig:
    return LogConfig(
        segment_bytes=config.log_segment_bytes,
        max_message_bytes=config.message_max_bytes,
        flush_messages=config.log_flush_interval_messages,
        flush_ms=config.log_flush_interval_ms,
    )


def _schema_registry(config: BrokerConfig, topics: TopicManager) -> Registry | None:
    """The schema registry over ``_schemas`` (created when the registry is served), None
    when it is neither served nor ever was on this data directory."""
    if topics.get(SCHEMAS_TOPIC) is None:
        if config.schema_registry_host is None:
            return None
        topics.create(SCHEMAS_TOPIC, 1, INTERNAL_TOPIC_CONFIGS)
    return Registry(topics.log(SCHEMAS_TOPIC, 0))


def _loop_ms(loop: asyncio.AbstractEventLoop) -> float:
    """The event loop's clock in ms (quota sensors)."""
    return loop.time() * 1000


def _throttled(body: Any, throttle_ms: int) -> Any:
    """``body`` with ``throttle_time_ms`` raised to ``throttle_ms`` when it has the field
    (KIP-219: a throttled client learns for how long)."""
    if throttle_ms > 0 and getattr(body, "throttle_time_ms", None) is not None:
        body.throttle_time_ms = max(int(body.throttle_time_ms), throttle_ms)
    return body


def _raise_in(response: Any, api_key: int, version: int, throttle_ms: int) -> Any:
    if response is not None:
        frame = response[0] if isinstance(response, list) else response
        if isinstance(frame, bytearray):
            raise_throttle(api_key, version, frame, throttle_ms)
    return response


def _encoded_throttled(
    result: Any, api_key: int, version: int, throttle_ms: int
) -> Response | Awaitable[Response | None]:
    """An encoded response (Produce, Fetch: now, a future or a coroutine of it) with its
    ``throttle_time_ms`` raised to a request-time throttle (the larger one wins, as
    Kafka's)."""
    if isinstance(result, bytes | bytearray | list):
        return cast("Response", _raise_in(result, api_key, version, throttle_ms))

    async def later() -> Response | None:
        return cast("Response | None", _raise_in(await result, api_key, version, throttle_ms))

    return later()


class Broker:
    """A single-node Kafka-wire broker over one data directory.

    ``await start()`` opens the data directory (its writer lock; DataDirLockedError if
    another process holds it) and binds the listener; ``await stop()`` stops accepting,
    finishes in-flight requests and closes every log cleanly."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._servers: list[asyncio.Server] = []
        self.listeners: dict[str, tuple[str, int]] = {}
        """Bound (host, port) by listener name."""
        self._advertised: dict[str, tuple[str, int]] = {}
        self._data_dir: DataDir | None = None
        self._ctx: BrokerContext | None = None
        self._limits = ConnectionLimits(config)
        self._connections = self._limits.connections
        self._idle_timer: asyncio.TimerHandle | None = None
        self._share_timer: asyncio.TimerHandle | None = None
        self._txn_task: asyncio.Task[None] | None = None
        self.bound: tuple[str, int] | None = None
        self._retention: RetentionTask | None = None  # retention / cleaner thread
        self._iceberg: IcebergTask | None = None  # Iceberg topics' committer thread
        self._tiering: TieringTask | None = None  # tiered storage thread (KIP-405)
        self._metrics_server: Any = None  # prometheus-client's WSGI server (its own thread)
        self._snapshot_timer: asyncio.TimerHandle | None = None
        self.metrics_bound: tuple[str, int] | None = None
        self._registry_server: RegistryServer | None = None
        self.schema_registry_bound: tuple[str, int] | None = None
        """The schema registry's bound (host, port) (None: not served)."""

    async def start(self) -> None:
        """Open the data directory and start listening. Raises OSError (address in use)."""
        config = self.config
        loop = asyncio.get_running_loop()
        config.data_dir.mkdir(parents=True, exist_ok=True)
        data_dir = DataDir(
            config.data_dir,
            create=True,
            default_config=_log_config(config),
            remote=remote_storage(config),
        )
        self._data_dir = data_dir
        try:
            committed = CommittedOffsets(data_dir)  # creates __consumer_offsets on first start
            topics = TopicManager(
                data_dir,
                loop,
                num_partitions=config.num_partitions,
                auto_create=config.auto_create_topics_enable,
            )
            state = BrokerState(config.data_dir)
            state.begin_epoch()  # a lone voter elects itself at each start (DescribeQuorum)
            share_state = ShareGroupState(topics)  # __share_group_state, when it exists
            producers = ProducerStateTable()
            rebuild(producers, topics, config.data_dir)  # before any produce can arrive
            schemas = _schema_registry(config, topics)
            listeners = configured_listeners(config)
            tls = _tls_context(config) if any(lst.tls for lst in listeners) else None
            for lst in listeners:
                server = await loop.create_server(
                    functools.partial(self._new_connection, lst),
                    lst.host,
                    lst.port,
                    reuse_address=True,
                    ssl=tls if lst.tls else None,
                    start_serving=False,  # bound now, listening once recovery is done
                )
                self._servers.append(server)
                port = int(server.sockets[0].getsockname()[1])
                self.listeners[lst.name] = (lst.host, port)
                self._advertised[lst.name] = (
                    lst.advertised_host or _advertised_host(lst.host),
                    lst.advertised_port or port,
                )
        except BaseException:
            for server in self._servers:
                server.close()
            data_dir.close()
            raise
        first = listeners[0].name
        self.bound = self.listeners[first]
        quota_store = QuotaStore(config.data_dir)
        clock = functools.partial(_loop_ms, loop)
        self._limits.rates = ConnectionRates(
            quota_store,
            config.max_connection_creation_rate,
            window_num=config.quota_window_num,
            window_seconds=config.quota_window_size_seconds,
            clock=clock,
        )
        groups = GroupCoordinator(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
        )
        consumer_groups = ClassicMemberCoordinator(
            committed,
            topics,
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            unreleased_heartbeat_interval_ms=(
                config.group_consumer_unreleased_heartbeat_interval_ms
            ),
            assignors=[a.strip() for a in config.group_consumer_assignors.split(",")],
            max_size=config.group_consumer_max_size,
            classic=groups,
            migration_policy=config.group_consumer_migration_policy,
        )
        consumer_groups.load()

        def topics_changed() -> None:
            state.metadata_changed()
            consumer_groups.topics_changed()
            if self._ctx is not None:
                self._ctx.schema_validation = validation_map(topics.all())

        topics.on_change = topics_changed
        self._ctx = BrokerContext(
            config=config,
            topics=topics,
            state=state,
            producers=producers,
            committed=committed,
            sync_before_ack=config.log_flush_interval_messages is None
            and config.log_flush_interval_ms is None,
            durability=DurabilityWaiters(loop),
            listeners=tuple(
                dataclasses.replace(
                    lst,
                    port=self.listeners[lst.name][1],
                    advertised_host=self._advertised[lst.name][0],
                    advertised_port=self._advertised[lst.name][1],
                )
                for lst in listeners
            ),
            transactions=TransactionCoordinator(
                topics,
                committed,
                state.next_producer_id,
                max_timeout_ms=config.transaction_max_timeout_ms,
                expiration_ms=config.transactional_id_expiration_ms,
                coordinator_epoch=state.quorum_epoch,
            ),
            share_groups=ShareGroupCoordinator(
                share_state,
                topics,
                lock_ms=config.group_share_record_lock_duration_ms,
                delivery_count_limit=config.group_share_delivery_count_limit,
                max_record_locks=config.group_share_partition_max_record_locks,
                session_timeout_ms=config.group_share_session_timeout_ms,
                heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                max_size=config.group_share_max_size,
            ),
            share_sessions=ShareSessionCache(config.group_share_max_share_sessions),
            consumer_groups=consumer_groups,
            groups=groups,
            credentials=CredentialStore(config.data_dir),
            sasl_mechanisms=config.sasl_enabled_mechanisms,
            authorizer=Authorizer(
                config.data_dir,
                enabled=bool(config.authorizer_class_name),
                super_users=config.super_users,
                allow_if_no_acl=config.allow_everyone_if_no_acl_found,
            ),
            quotas=QuotaManager(
                quota_store,
                window_num=config.quota_window_num,
                window_seconds=config.quota_window_size_seconds,
                clock=clock,
            ),
        )
        self._ctx.schemas = schemas
        self._ctx.schema_validation = validation_map(topics.all())
        topics.sync_observer = self._ctx.metrics.observe_sync
        self._ctx.share_groups.on_member_gone = self._ctx.share_sessions.close
        self._schedule_idle_sweep()
        self._schedule_share_expiry()
        await self._ctx.transactions.recover(producers)  # Prepare*, stray open transactions
        self._txn_task = loop.create_task(self._expire_transactions())
        self._snapshot_timer = loop.call_later(_SNAPSHOT_INTERVAL_S, self._snapshot_producers)
        self._retention = start_retention(config, self._data_dir, committed.lowest)
        remote_url = config.remote_storage_url
        self._iceberg = IcebergTask(
            self._data_dir,
            catalog_properties(
                config.data_dir,
                config.iceberg_catalog_type,
                config.iceberg_catalog_uri,
                config.iceberg_catalog_warehouse,
                remote_url=remote_url,
                remote_endpoint_url=config.remote_storage_endpoint_url,
            ),
            # tiered topics' tables on the store, unless a warehouse is configured
            remote_warehouse=(
                remote_warehouse(remote_url)
                if remote_url and not config.iceberg_catalog_warehouse
                else None
            ),
        )
        self._iceberg.start()
        self._tiering = start_tiering(config, self._data_dir)
        topics.on_delete = self._topic_deleted
        if config.metrics_host is not None:
            self._start_metrics(loop)
        if config.schema_registry_host is not None:
            await self._start_schema_registry()
        # clients are let in only now: transactions found open at a crash are aborted and
        # Prepare* completed first (Kafka answers COORDINATOR_LOAD_IN_PROGRESS meanwhile)
        for server in self._servers:
            await server.start_serving()
        for lst in listeners:
            host, port = self.listeners[lst.name]
            a_host, a_port = self._advertised[lst.name]
            log.info(
                "seglog broker listening on %s:%d (%s, %s; advertised %s:%d), data directory %s",
                host, port, lst.name, lst.protocol, a_host, a_port, config.data_dir,
            )  # fmt: skip

    def _topic_deleted(self, name: str, info: TopicInfo, remote: list[RemotePartition]) -> None:
        """A topic was deleted: its remote objects and Iceberg tables go in the
        background (the tiering and Iceberg threads; DeleteTopics does not wait)."""
        if remote and self._tiering is not None:
            self._tiering.purge(remote)
        if iceberg_mode(info.configs) is not None and self._iceberg is not None:
            self._iceberg.drop_topic(name, info.topic_id)

    def _start_metrics(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve ``/metrics`` (Prometheus text format) on ``metrics_host:metrics_port``."""
        ctx, config = self._ctx, self.config
        assert ctx is not None
        assert config.metrics_host is not None
        metrics = ctx.metrics
        metrics.serve_collector(
            snapshot_from_loop(
                loop,
                ctx.topics,
                ctx.committed,
                metrics,
                self._connections_by_listener,
                quotas=ctx.quotas,
                share_groups=ctx.share_groups,
                transactions=ctx.transactions,
            )
        )
        server, _thread = start_http_server(
            config.metrics_port, config.metrics_host, registry=metrics.registry
        )
        self._metrics_server = server
        self.metrics_bound = (config.metrics_host, int(server.server_port))
        log.info("metrics on http://%s:%d/metrics", config.metrics_host, server.server_port)

    async def _start_schema_registry(self) -> None:
        """Serve the schema registry's REST API (``seglog.broker.schema_registry``);
        on a bind error, stop the broker and raise the OSError."""
        assert self._ctx is not None
        server = registry_server(self._ctx, self._ctx.listeners)
        try:
            await server.start()
        except OSError:
            await self.stop()
            raise
        self._registry_server = server
        self.schema_registry_bound = server.bound
        self._ctx.schema_registry_url = server.url

    def _snapshot_producers(self, *, reschedule: bool = True) -> None:
        """Write the idempotent-producer snapshot (every minute and at shutdown), so a
        restart scans only the batches appended after it."""
        ctx = self._ctx
        if ctx is None:
            return
        try:
            write_snapshot(ctx.producers, ctx.topics, self.config.data_dir)
        except (OSError, SeglogError) as exc:  # the next start scans more; never fatal
            log.warning("cannot write the producer-state snapshot: %s", exc)
        if reschedule and not ctx.shutting_down:
            loop = asyncio.get_running_loop()
            self._snapshot_timer = loop.call_later(_SNAPSHOT_INTERVAL_S, self._snapshot_producers)

    def _new_connection(self, listener: Listener) -> Connection:
        conn = Connection(
            self.dispatch,
            max_request_bytes=self.config.socket_request_max_bytes,
            max_inflight=self.config.max_inflight_requests,
            on_open=self._admit,
            on_close=self._closed,
            listener=listener,
        )
        conn.partial_timeout_s = self.config.partial_request_timeout_ms / 1000
        return conn

    # -- connection limits ------------------------------------------------------------------

    def _admit(self, conn: Connection) -> bool:
        """Count a new connection (:class:`ConnectionLimits`: refused ones are closed at
        once), then start its SASL deadline and read its TLS principal."""
        shutting_down = self._ctx is None or self._ctx.shutting_down
        if not self._limits.admit(conn, shutting_down=shutting_down):
            return False
        if not conn.session.authenticated and self.config.sasl_authentication_timeout_ms > 0:
            timeout = self.config.sasl_authentication_timeout_ms / 1000
            asyncio.get_running_loop().call_later(timeout, self._auth_expired, conn)
        if conn.listener.tls:
            principal = principal_from_cert(conn.peer_certificate())
            if principal is not None:
                conn.session.principal = principal
                log.info("TLS client %s from %s", principal, conn.peer)
        return True

    @staticmethod
    def _auth_expired(conn: Connection) -> None:
        if not conn.session.authenticated:
            log.warning("closing connection from %s: not authenticated in time", conn.peer)
            conn.abort()

    def _closed(self, conn: Connection) -> None:
        self._limits.closed(conn)

    def _connections_by_listener(self) -> dict[str, int]:
        counts = dict.fromkeys(self.listeners, 0)
        for conn in self._connections:
            counts[conn.listener.name] = counts.get(conn.listener.name, 0) + 1
        return counts

    @property
    def connection_count(self) -> int:
        """Open client connections (refused ones excluded)."""
        return len(self._connections)

    # -- idle connections ---------------------------------------------------------------

    def _schedule_idle_sweep(self) -> None:
        idle_ms = self.config.connections_max_idle_ms
        if idle_ms <= 0:
            return
        interval = min(max(idle_ms / 4000, 0.01), 30.0)
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(interval, self._sweep_idle)

    def _sweep_idle(self) -> None:
        """Close connections with nothing in flight and no traffic for
        ``connections.max.idle.ms`` (Kafka's default: 10 minutes)."""
        self._idle_timer = None
        if self._ctx is None or self._ctx.shutting_down:
            return
        if self._ctx.quotas is not None:
            self._ctx.quotas.expire()
        now = asyncio.get_running_loop().time()
        limit = self.config.connections_max_idle_ms / 1000
        for conn in list(self._connections):
            if not conn.busy and now - conn.last_active > limit:
                log.info("closing connection from %s: idle for %.1f s", conn.peer, limit)
                conn.close_idle()
        self._schedule_idle_sweep()

    # -- share groups ---------------------------------------------------------------------

    def _schedule_share_expiry(self) -> None:
        interval = min(max(self.config.group_share_session_timeout_ms / 4000, 0.05), 1.0)
        self._share_timer = asyncio.get_running_loop().call_later(interval, self._expire_share)

    def _expire_share(self) -> None:
        """Remove share-group members past ``group.share.session.timeout.ms`` (their
        records released, their share sessions closed)."""
        self._share_timer = None
        if self._ctx is None or self._ctx.shutting_down:
            return
        try:
            self._ctx.share_groups.expire()
        except (OSError, SeglogError) as exc:  # a journal write failed: retried next round
            log.warning("share-group member expiry: %s", exc)
        self._schedule_share_expiry()

    # -- transactions ---------------------------------------------------------------------

    async def _expire_transactions(self) -> None:
        """Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: abort
        transactions past their timeout, forget expired transactional ids."""
        interval = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        while self._ctx is not None and not self._ctx.shutting_down:
            await asyncio.sleep(interval / 1000)
            if self._ctx is None or self._ctx.shutting_down:
                return
            try:
                await self._ctx.transactions.expire()
            except (OSError, SeglogError) as exc:  # a write failed: retried next round
                log.warning("transaction timeouts: %s", exc)

    # -- requests -------------------------------------------------------------------------

    def dispatch(
        self, conn: Connection, frame: memoryview
    ) -> Response | Awaitable[Response | None] | None:
        """:meth:`handle` one request, counted and timed per API (metrics): until the
        response is ready, long polls and fsync waits included."""
        started = time.perf_counter()
        result = self.handle(conn, frame)
        spec = REGISTRY.get(int.from_bytes(frame[:2], "big"))
        if spec is None or self._ctx is None:
            return result
        metrics = self._ctx.metrics
        name = spec.name.removesuffix("Request")

        def done(_fut: object = None) -> None:
            metrics.requests.labels(name).inc()
            metrics.request_seconds.labels(name).observe(time.perf_counter() - started)

        if result is None or isinstance(result, bytes | bytearray | list):
            done()
            return result
        if isinstance(result, asyncio.Future):
            result.add_done_callback(done)
            return result
        return self._timed(result, done)

    @staticmethod
    async def _timed(
        pending: Awaitable[Response | None], done: Callable[[], None]
    ) -> Response | None:
        try:
            return await pending
        finally:
            done()

    def handle(
        self, conn: Connection, frame: memoryview
    ) -> Response | Awaitable[Response | None] | None:
        """Decode one request frame and run its handler from the registry
        (``apis/registry.py``). Raises ProtocolError (the connection is closed) for a
        malformed frame, an unknown API key, a version outside the served range, or a
        request its SASL session does not allow; ApiVersions of an unknown version gets a
        v0 body with error 35 UNSUPPORTED_VERSION (KIP-511)."""
        ctx = self._ctx
        assert ctx is not None
        header = parse_request_header(frame, flexible_request)
        key, version = header.api_key, header.api_version
        spec = REGISTRY.get(key)
        if spec is None:
            raise ProtocolError(f"unknown API key {api_name(key)}")
        session = conn.session
        if session.checked:
            check_session(ctx, session, key, spec.name)  # KIP-368: re-authenticating / expired
        if not spec.accepts(version):
            if key == ApiKey.API_VERSIONS:
                return encode_response(
                    api_versions_body(0, UNSUPPORTED_VERSION), header.correlation_id
                )
            raise ProtocolError(f"unsupported version {version} of {spec.name} (API {key})")
        if not session.authenticated and not spec.before_authentication:
            raise ProtocolError(f"{spec.name} before SASL authentication on {conn.listener.name}")
        listener = conn.listener
        host, port = self._advertised[listener.name]
        rctx = RequestContext(
            header=header,
            principal=session.principal,
            client_host=conn.peer_host,
            listener=listener.name,
            host=host,
            port=port,
            session=session,
            sasl_listener=listener.sasl,
            peer=conn.peer,
            close_connection=conn.close_idle,
            mute=conn.mute,
            on_connection_close=conn.on_closed,
            authorizer=ctx.authorizer,
        )
        request: Any
        if spec.raw_from is not None and version >= spec.raw_from:
            request = frame
        else:
            check_array_counts(spec.request, frame, header.body_offset, version)
            try:
                request = spec.request.decode(frame[header.body_offset :], version=version)
            except Exception as exc:
                raise ProtocolError(f"malformed {spec.name} v{version}: {exc!r}") from exc
            reject_nulls(request, version)  # null where the schema forbids it: malformed
        started = time.perf_counter()
        result = spec.handler(ctx, rctx, request)
        throttle = 0
        if ctx.quotas is not None and not spec.before_authentication:
            # request_percentage: the handler's time on the event loop (Kafka's request
            # handler time)
            busy_ms = (time.perf_counter() - started) * 1000
            throttle = ctx.quotas.record_request_time(rctx.user, rctx.client_id, busy_ms)
            conn.mute(throttle)
        if result is None or spec.encoded:
            if throttle > 0 and result is not None:
                return _encoded_throttled(result, key, version, throttle)
            return cast("Response | Awaitable[Response | None] | None", result)
        if isinstance(result, Coroutine):
            return self._encode_later(header.correlation_id, result, throttle)
        return encode_response(_throttled(result, throttle), header.correlation_id)

    @staticmethod
    async def _encode_later(
        correlation_id: int, pending: Awaitable[Any], throttle: int
    ) -> bytearray | None:
        body = await pending
        if body is None:
            return None
        return encode_response(_throttled(body, throttle), correlation_id)

    async def stop(self) -> None:
        """Stop accepting, answer in-flight requests (long polls return at once), close
        connections and logs (a clean shutdown: no recovery scan on the next start)."""
        for server in self._servers:
            server.close()
        if self._registry_server is not None:
            await self._registry_server.stop()
            self._registry_server = None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._share_timer is not None:
            self._share_timer.cancel()
            self._share_timer = None
        if self._txn_task is not None:
            self._txn_task.cancel()  # a cut abort is completed at the next start
            self._txn_task = None
        if self._ctx is not None:
            self._ctx.shutting_down = True
            self._ctx.topics.wake_all()
            self._ctx.groups.shutdown()  # parked JoinGroup/SyncGroup answer at once
            self._ctx.consumer_groups.shutdown()
        timeout = self.config.shutdown_timeout_ms / 1000
        if self._connections:
            await asyncio.gather(
                *(c.drain_and_close(timeout) for c in list(self._connections)),
                return_exceptions=True,
            )
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        if self._ctx is not None:
            await self._ctx.transactions.settled()  # ended transactions' Complete records
            self._snapshot_producers(reschedule=False)  # in-flight produces are done
            self._ctx.share_groups.shutdown()  # share partitions' journals: clean snapshots
            self._ctx.topics.close()
        if self._retention is not None:
            await asyncio.to_thread(self._retention.stop)  # before the logs close
            self._retention = None
        if self._iceberg is not None:
            await asyncio.to_thread(self._iceberg.stop)  # before the logs close
            self._iceberg = None
        if self._tiering is not None:
            await asyncio.to_thread(self._tiering.stop)
            self._tiering = None
        if self._metrics_server is not None:
            await asyncio.to_thread(self._metrics_server.shutdown)
            self._metrics_server.server_close()
            self._metrics_server = None
        if self._data_dir is not None:
            self._data_dir.close()
            self._data_dir = None
        log.info("seglog broker stopped")

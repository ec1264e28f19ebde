"""The schema registry's HTTP server, run by uvicorn on the broker's own event loop.

Why uvicorn + starlette: the web console already uses them (so they are well kept and
already in the dependency set), starlette's routing gives the REST resources in a table,
and uvicorn's ``Server`` runs inside an existing asyncio loop: the registry's state is
owned by the broker's loop, like every other broker service, so no lock or thread hop
sits between a registration and the ``_schemas`` log. The listening socket is bound here
(an OSError at start, like a Kafka listener) and handed to uvicorn; uvicorn's own signal
handling is never installed (``serve()`` is not called): the broker's SIGTERM handler
stops it, through :meth:`RegistryServer.stop`. uvicorn picks httptools (a main
dependency) as its HTTP parser: trivial GETs ran ~3x faster than with h11 on this machine
(benchmarks/schema_registry_bench.py, 1,800 -> 6,000/s).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvicorn

from seglog.broker.config.listeners import Listener
from seglog.broker.context import BrokerContext
from seglog.broker.schema_registry.access import Access
from seglog.broker.schema_registry.routes import registry_app
from seglog.schemas import Registry

__all__ = ["RegistryServer", "durability_wait", "registry_server"]

log = logging.getLogger("seglog.broker.schema_registry")


class RegistryServer:
    """Confluent's REST API on ``host:port`` (0: any free port; :attr:`bound` after
    :meth:`start`), over HTTPS when ``tls`` names (certfile, keyfile, cafile,
    client_auth)."""

    def __init__(  # noqa: PLR0917 (the server's parts, built by registry_server)
        self,
        registry: Registry,
        access: Access,
        durable: Callable[[], Awaitable[None]],
        host: str,
        port: int,
        tls: tuple[Path, Path | None, Path | None, str] | None = None,
    ) -> None:
        self._app = registry_app(registry, access, durable)
        self._host, self._port, self._tls = host, port, tls
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.bound: tuple[str, int] | None = None
        self.url: str | None = None
        """``http(s)://host:port`` once started (DescribeConfigs' ``schema.registry.listen``)."""

    async def start(self) -> None:
        """Bind and start serving. Raises OSError (address in use)."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        kwargs: dict[str, object] = {}
        if self._tls is not None:
            certfile, keyfile, cafile, client_auth = self._tls
            kwargs = {
                "ssl_certfile": str(certfile),
                "ssl_keyfile": str(keyfile) if keyfile else None,
                "ssl_ca_certs": str(cafile) if cafile else None,
                "ssl_cert_reqs": {
                    "required": ssl.CERT_REQUIRED,
                    "requested": ssl.CERT_OPTIONAL,
                }.get(client_auth, ssl.CERT_NONE),
            }
        config = uvicorn.Config(
            self._app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=5,  # then open connections are closed
            **kwargs,  # type: ignore[arg-type]
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        self._server = server
        self._socket = sock
        self.bound = (self._host, int(sock.getsockname()[1]))
        self.url = f"{'https' if self._tls else 'http'}://{self._host}:{self.bound[1]}"
        self._task = asyncio.get_running_loop().create_task(server.main_loop())
        scheme = "https" if self._tls else "http"
        log.info("schema registry on %s://%s:%d", scheme, *self.bound)

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, close."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        server.should_exit = True
        await task
        await server.shutdown(sockets=[self._socket])
        self._server = self._task = None


def durability_wait(ctx: BrokerContext) -> Callable[[], Awaitable[None]]:
    """What the registry's HTTP writes await: the registry's log durable up to its last
    write (the broker's group-commit waiters under fsync-before-ack; else an explicit
    ``Log.sync`` in a thread: the registry answers a write only once it is on disk,
    whatever the produce policy). Raises the log's error when the fsync fails."""

    async def durable() -> None:
        registry = ctx.schemas
        if registry is None or registry.log is None:
            return
        schemas_log, end = registry.log, registry.end_offset
        if not ctx.sync_before_ack:
            await asyncio.to_thread(schemas_log.sync)
            return
        if schemas_log.high_watermark >= end:
            return
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        def settled(exc: BaseException | None) -> None:
            if not done.done():
                done.set_result(exc)

        ctx.durability.wait(schemas_log, end, settled)
        failure = await done
        if failure is not None:
            raise failure

    return durable


def registry_server(ctx: BrokerContext, listeners: tuple[Listener, ...]) -> RegistryServer:
    """The registry server of a broker (not started): ``config.schema_registry_host``
    and port, HTTPS when a listener uses TLS (the broker's certificate, CAs and
    ``ssl.client.auth``), HTTP Basic authentication when a listener uses SASL, the
    broker's ACLs."""
    config = ctx.config
    assert ctx.schemas is not None
    assert config.schema_registry_host is not None
    tls = None
    if any(lst.tls for lst in listeners) and config.ssl_certfile is not None:
        tls = (config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile, config.ssl_client_auth)
    credentials = ctx.credentials if any(lst.sasl for lst in listeners) else None
    return RegistryServer(
        ctx.schemas,
        Access(credentials, ctx.authorizer),
        durability_wait(ctx),
        config.schema_registry_host,
        config.schema_registry_port,
        tls,
    )

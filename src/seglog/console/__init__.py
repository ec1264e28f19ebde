"""seglog's web console: topics, messages, consumer groups and throughput of any
Kafka-protocol broker (``seglog console -b HOST:PORT``, or ``seglog serve
--console-listen``). Needs the ``console`` extra (starlette, uvicorn).

Layer: above the broker (it is a Kafka client), below the CLI.
"""

from __future__ import annotations

from seglog.console._app import create_app
from seglog.console._backend import Backend, Throughput, render_bytes

__all__ = ["Backend", "Throughput", "create_app", "render_bytes", "serve_console"]


def serve_console(
    conf: dict[str, object],
    host: str,
    port: int,
    broker_started_s: float | None = None,
    schema_registry_url: str | None = None,
) -> None:
    """Run the console on ``host:port`` until interrupted (uvicorn, blocking);
    ``broker_started_s``: the broker's start in epoch seconds when run in its process;
    ``schema_registry_url``: the registry its Schemas page lists."""
    import uvicorn  # noqa: PLC0415

    app = create_app(
        dict(conf), broker_started_s=broker_started_s, schema_registry_url=schema_registry_url
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")

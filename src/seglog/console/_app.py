"""The console's web app (Starlette): server-rendered pages, the JSON API they are built
from, and the vendored uPlot chart library (``static/``, MIT, no CDN at run time).

Read-only: every route is a GET. Pages: ``/`` overview with a live throughput chart,
``/topics``, ``/topics/{name}``, ``/topics/{name}/messages`` (seek by offset or timestamp,
JSON/text/hex, headers, paging, live tail), ``/groups`` (classic, consumer and share
groups with their type and state), ``/groups/{id}`` (members, assignments, lag per
partition with a bar chart; a share group's share-partition start offsets), ``/schemas``
(the subjects and versions of the schema registry, when one is given). The same data as
JSON under ``/api/``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from seglog.console import _schemas
from seglog.console._backend import Backend, Throughput

__all__ = ["create_app"]

_STATIC = Path(__file__).with_name("static")
_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#1d3557;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em 1.5em}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f1f1f1}pre{margin:0;white-space:pre-wrap;max-width:60em}
.bar{background:#e63946;height:1em}.muted{color:#777}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _page(title: str, body: str, *, head: str = "") -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)} · seglog</title>"
        f"<style>{_STYLE}</style>{head}</head><body><nav><a href='/'>seglog console</a>"
        f"<a href='/topics'>Topics</a><a href='/groups'>Groups</a>"
        f"<a href='/transactions'>Transactions</a><a href='/schemas'>Schemas</a></nav>"
        f"<main><h1>{_e(title)}</h1>{body}</main></body></html>"
    )


def _table(headers: list[str], rows: list[list[str]], table_id: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    ident = f" id='{table_id}'" if table_id else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


_CHART_HEAD = (
    "<link rel='stylesheet' href='/static/uPlot.min.css'>"
    "<script src='/static/uPlot.iife.min.js'></script>"
)
_CHART_JS = """
<script>
const el = document.getElementById('throughput');
let plot = null;
async function refresh() {
  const r = await fetch('/api/throughput'); const d = await r.json();
  const data = [d.time, d.records_in, d.records_consumed];
  if (!plot) {
    plot = new uPlot({width: 800, height: 260, title: 'records per second',
      series: [{}, {label: 'in (log end offsets)', stroke: '#1d3557'},
               {label: 'consumed (committed offsets)', stroke: '#e63946'}]}, data, el);
  } else { plot.setData(data); }
}
refresh(); setInterval(refresh, 2000);
</script>
"""


def _messages_link(topic: str, partition: int) -> str:
    return f"<a href='/topics/{_e(topic)}/messages?partition={partition}'>messages</a>"


class _BrokerLogin:
    """Behind the broker's authentication when security is on: with a SASL configuration
    and no user name of its own, every web request must carry HTTP Basic credentials; they
    are checked by authenticating to the broker with them (a bad pair is 401), and the
    pages are then read with that principal, so the broker's ACLs decide what each person
    sees. Without SASL the console's own configuration serves everyone (read-only)."""

    def __init__(self, conf: dict[str, Any], broker_started_s: float | None = None) -> None:
        self.broker_started_s = broker_started_s
        sasl = str(conf.get("security.protocol", "")).upper().startswith("SASL")
        self.required = sasl and not conf.get("sasl.username")
        self.conf = conf
        self.shared = None if self.required else Backend(conf, broker_started_s)
        self.users: dict[tuple[str, str], Backend] = {}

    def any_backend(self) -> Backend | None:
        """The console's own reader, else the first logged-in user's (the throughput
        chart samples with it), else None."""
        if self.shared is not None:
            return self.shared
        return next(iter(list(self.users.values())), None)

    def _backend_for(self, user: str, password: str) -> Backend | None:
        key = (user, hashlib.sha256(password.encode()).hexdigest())
        found = self.users.get(key)
        if found is None:
            candidate = Backend(
                {**self.conf, "sasl.username": user, "sasl.password": password},
                self.broker_started_s,
            )
            try:
                candidate.admin.list_topics(timeout=10)  # authenticates, or raises
            except Exception:
                return None
            found = self.users[key] = candidate
        return found

    async def __call__(self, request: Request, call_next: Any) -> Response:
        if not self.required or request.url.path.startswith("/static/"):
            request.state.backend = self.shared
            return await call_next(request)  # type: ignore[no-any-return]
        header = request.headers.get("authorization", "")
        backend = None
        if header.lower().startswith("basic "):
            try:
                user, _sep, password = base64.b64decode(header[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user = password = ""
            if user:
                backend = await run_in_threadpool(self._backend_for, user, password)
        if backend is None:
            return Response(
                "log in with your broker user (SASL)",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="seglog"'},
            )
        request.state.backend = backend
        return await call_next(request)  # type: ignore[no-any-return]


def _duration(seconds: float) -> str:
    """``3 d 04:05:06`` / ``04:05:06`` from seconds."""
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days} d {clock}" if days else clock


def _option(value: str, chosen: str) -> str:
    return f"<option{' selected' if value == chosen else ''}>{value}</option>"


def create_app(
    conf: dict[str, Any],
    *,
    sample_interval_s: float = 1.0,
    broker_started_s: float | None = None,
    schema_registry_url: str | None = None,
) -> Starlette:
    """The console for the brokers of ``conf`` (librdkafka configuration); with
    ``broker_started_s`` (epoch seconds, set by ``seglog serve --console-listen``) the
    overview shows the broker's uptime, else the console's; ``schema_registry_url``: the
    registry whose subjects ``/schemas`` lists."""
    auth = _BrokerLogin(conf, broker_started_s)
    throughput = Throughput(auth.any_backend, sample_interval_s)

    async def call(fn: Any, *args: Any) -> Any:
        return await run_in_threadpool(fn, *args)

    async def overview(request: Request) -> Response:
        o = await call(request.state.backend.overview)
        brokers = ", ".join(f"{b['node_id']}@{b['host']}:{b['port']}" for b in o["brokers"])
        disk = "unknown" if o["disk_bytes"] is None else f"{o['disk_bytes']:,} bytes"
        body = (
            _table(
                [
                    "cluster id",
                    "controller",
                    "brokers",
                    "topics",
                    "partitions",
                    "disk use",
                    "console up" if o["broker_uptime_s"] is None else "broker up",
                ],
                [
                    [
                        _e(o["cluster_id"]),
                        _e(o["controller_id"]),
                        _e(brokers),
                        _e(o["topics"]),
                        _e(o["partitions"]),
                        _e(disk),
                        _e(
                            _duration(
                                o["console_uptime_s"]
                                if o["broker_uptime_s"] is None
                                else o["broker_uptime_s"]
                            )
                        ),
                    ]
                ],
                "overview",
            )
            + "<h2>Throughput</h2><div id='throughput'></div>"
            + _CHART_JS
        )
        return _page("Overview", body, head=_CHART_HEAD)

    async def topics(request: Request) -> Response:
        rows = await call(request.state.backend.topics)
        body = _table(
            ["topic", "partitions", "records", "bytes"],
            [
                [
                    f"<a href='/topics/{_e(r['topic'])}'>{_e(r['topic'])}</a>",
                    _e(r["partitions"]),
                    _e(r["records"]),
                    _e("?" if r["bytes"] is None else r["bytes"]),
                ]
                for r in rows
            ],
            "topics",
        )
        return _page("Topics", body)

    async def topic(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            t = await call(request.state.backend.topic, name)
        except KeyError:
            return _page("Unknown topic", f"<p>No topic {_e(name)}.</p>")
        parts = _table(
            ["partition", "leader", "log start offset", "log end offset", "bytes", ""],
            [
                [
                    _e(p["partition"]),
                    _e(p["leader"]),
                    _e(p["log_start_offset"]),
                    _e(p["log_end_offset"]),
                    _e(p["bytes"]),
                    _messages_link(name, p["partition"]),
                ]
                for p in t["partitions"]
            ],
            "partitions",
        )
        configs = _table(
            ["config", "value"], [[_e(k), _e(v)] for k, v in t["configs"].items()], "configs"
        )
        return _page(f"Topic {name}", f"{parts}<h2>Configs</h2>{configs}")

    def _query(request: Request) -> tuple[int, int | None, int | None, int, str]:
        q = request.query_params
        partition = int(q.get("partition", "0"))
        offset = int(q["offset"]) if q.get("offset") not in (None, "") else None
        ts = int(q["timestamp"]) if q.get("timestamp") not in (None, "") else None
        limit = min(max(int(q.get("limit", "20")), 1), 500)
        fmt = q.get("format", "json") if q.get("format") in ("json", "text", "hex") else "json"
        return partition, offset, ts, limit, fmt

    async def messages(request: Request) -> Response:
        name = request.path_params["name"]
        partition, offset, ts, limit, fmt = _query(request)
        m = await call(request.state.backend.messages, name, partition, offset, ts, limit, fmt)
        rows = [
            [
                _e(r["offset"]),
                _e(r["timestamp"]),
                f"<pre>{_e(r['key'])}</pre>",
                f"<pre class='value'>{_e(r['value'])}</pre>",
                _e(", ".join(f"{k}={v}" for k, v in r["headers"])),
            ]
            for r in m["records"]
        ]
        base = f"/topics/{_e(name)}/messages?partition={partition}&limit={limit}&format={fmt}"
        prev_off = max(m["offset"] - limit, m["log_start_offset"])
        next_off = m["offset"] + len(m["records"])
        form = (
            f"<form method='get'><input type='hidden' name='partition' value='{partition}'>"
            f"offset <input name='offset' value='{m['offset']}' size='8'> or timestamp (ms) "
            f"<input name='timestamp' size='14'> format <select name='format'>"
            + "".join(_option(f, fmt) for f in ("json", "text", "hex"))
            + "</select> <button>Seek</button></form>"
        )
        nav = (
            f"<p><a id='prev' href='{base}&offset={prev_off}'>previous</a> · "
            f"<a id='next' href='{base}&offset={next_off}'>next</a> · "
            f"<a id='tail' href='{base}&tail=1'>live tail</a> "
            f"<span class='muted'>partition {partition}: offsets {m['log_start_offset']}"
            f"..{m['log_end_offset'] - 1}</span></p>"
        )
        tail = (
            "<script>setTimeout(() => location.reload(), 2000)</script>"
            if request.query_params.get("tail")
            else ""
        )
        table = _table(["offset", "timestamp", "key", "value", "headers"], rows, "messages")
        return _page(f"Messages of {name}", form + nav + table + tail)

    async def groups(request: Request) -> Response:
        rows = await call(request.state.backend.groups)
        body = _table(
            ["group", "type", "state"],
            [
                [
                    f"<a href='/groups/{_e(r['group'])}'>{_e(r['group'])}</a>",
                    _e(r["type"]),
                    _e(r["state"]),
                ]
                for r in rows
            ],
            "groups",
        )
        return _page("Groups", body)

    async def group(request: Request) -> Response:
        gid = request.path_params["group"]
        g = await call(request.state.backend.group, gid)
        members = _table(
            ["member id", "client id", "host", "assignment"],
            [
                [
                    _e(m["member_id"]),
                    _e(m["client_id"]),
                    _e(m["host"]),
                    _e(", ".join(m["assignment"])),
                ]
                for m in g["members"]
            ],
            "members",
        )
        top = max([p["lag"] for p in g["partitions"]] + [1])
        share = g["type"] == "share"
        lag = _table(
            ["topic", "partition", "start" if share else "committed", "log end", "lag", ""],
            [
                [
                    _e(p["topic"]),
                    _e(p["partition"]),
                    _e(p["start_offset"] if share else p["committed_offset"]),
                    _e(p["log_end_offset"]),
                    f"<span class='lag'>{p['lag']}</span>",
                    f"<div class='bar' style='width:{max(1, int(300 * p['lag'] / top))}px'></div>",
                ]
                for p in g["partitions"]
            ],
            "lag",
        )
        state = (
            f"<p>type <b id='type'>{_e(g['type'])}</b>, "
            f"state <b id='state'>{_e(g['state'])}</b></p>"
        )
        body = f"{state}<h2>Members</h2>{members}<h2>Lag</h2>{lag}"
        return _page(f"Group {gid}", body)

    async def transactions(request: Request) -> Response:
        rows = await call(request.state.backend.transactions)
        now_ms = time.time() * 1000
        body = _table(
            ["transactional id", "state", "producer id", "epoch", "running", "timeout",
             "partitions"],
            [
                [
                    _e(r["transactional_id"]), _e(r["state"]), _e(r["producer_id"]),
                    _e(r["producer_epoch"]),
                    _e(_duration(max(now_ms - r["start_time_ms"], 0) / 1000)
                       if r["start_time_ms"] >= 0 else "-"),
                    _e(_duration(r["timeout_ms"] / 1000)), _e(", ".join(r["partitions"])),
                ]
                for r in rows
            ],
            "transactions",
        )  # fmt: skip
        if not rows:
            body = "<p class='muted'>No transaction in flight.</p>" + body
        return _page("Transactions", body)

    async def _subjects(request: Request) -> list[dict[str, Any]] | str:
        if schema_registry_url is None:
            return "no schema registry (seglog serve --schema-registry-listen)"
        try:
            found: list[dict[str, Any]] = await call(
                _schemas.subjects, schema_registry_url, request.headers.get("authorization")
            )
        except OSError as exc:
            return f"schema registry {schema_registry_url}: {exc}"
        return found

    async def schemas(request: Request) -> Response:
        found = await _subjects(request)
        if isinstance(found, str):
            return _page("Schemas", f"<p class='muted'>{_e(found)}</p>")
        body = _table(
            ["subject", "versions", "latest id", "type", "latest schema"],
            [
                [
                    _e(s["subject"]),
                    _e(", ".join(map(str, s["versions"]))),
                    _e(s["id"]),
                    _e(s["schemaType"]),
                    f"<pre>{_e(s['schema'])}</pre>",
                ]
                for s in found
            ],
            "schemas",
        )
        return _page("Schemas", body)

    async def api_schemas(request: Request) -> Response:
        found = await _subjects(request)
        if isinstance(found, str):
            return JSONResponse({"error": found}, status_code=503)
        return JSONResponse(found)

    async def api_throughput(_request: Request) -> Response:
        samples = list(throughput.samples)
        return JSONResponse(
            {
                "time": [s[0] for s in samples],
                "records_in": [s[1] for s in samples],
                "records_consumed": [s[2] for s in samples],
            }
        )

    async def api(request: Request) -> Response:
        kind = request.path_params["kind"]
        name = request.path_params.get("name")
        if kind == "overview":
            return JSONResponse(await call(request.state.backend.overview))
        if kind == "topics" and name is None:
            return JSONResponse(await call(request.state.backend.topics))
        if kind == "topics":
            try:
                return JSONResponse(await call(request.state.backend.topic, name))
            except KeyError:
                return JSONResponse({"error": f"unknown topic {name}"}, status_code=404)
        if kind == "groups" and name is None:
            return JSONResponse(await call(request.state.backend.groups))
        if kind == "groups":
            return JSONResponse(await call(request.state.backend.group, name))
        if kind == "transactions" and name is None:
            return JSONResponse(await call(request.state.backend.transactions))
        return JSONResponse({"error": f"unknown resource {kind}"}, status_code=404)

    async def api_messages(request: Request) -> Response:
        partition, offset, ts, limit, fmt = _query(request)
        name = request.path_params["name"]
        return JSONResponse(
            await call(request.state.backend.messages, name, partition, offset, ts, limit, fmt)
        )

    routes = [
        Route("/", overview),
        Route("/topics", topics),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/messages", messages),
        Route("/groups", groups),
        Route("/groups/{group}", group),
        Route("/transactions", transactions),
        Route("/schemas", schemas),
        Route("/api/schemas", api_schemas),
        Route("/api/throughput", api_throughput),
        Route("/api/topics/{name}/messages", api_messages),
        Route("/api/{kind}", api),
        Route("/api/{kind}/{name}", api),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        throughput.start()
        try:
            yield
        finally:
            await run_in_threadpool(throughput.stop)

    return Starlette(
        routes=routes, lifespan=lifespan, middleware=[Middleware(BaseHTTPMiddleware, dispatch=auth)]
    )

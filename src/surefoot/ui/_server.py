"""The inspector's ASGI app: server-rendered pages over an ``Inspector``, no script at all."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import durable
from ..errors import ConfigError, SurefootError, UnknownRunError
from . import _format
from ._events import SSE_HEADERS, event_frames, open_run_stream, start_offset
from ._guard import CSRF_COOKIE, HEADERS, TOKEN_COOKIE, Guard
from ._source import Inspector, RunsQuery

__all__ = ["build_app"]

HERE = Path(__file__).parent
ACTIONS = ("retry", "cancel", "resolve", "signal", "fork")
EVENTS_MAX_SECONDS = 300.0  # an SSE response ends after this; the client resumes by its last id
Handler = Callable[[Request], Awaitable[Response]]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value is untrusted text, in every template
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(fold=_format.fold, when=_format.when, ms=_format.ms, hms=_format.clock_time)
    env.globals.update(statuses=durable.STATUSES, ago=_format.ago, ages=list(_format.AGES))
    return env


def build_app(
    source: Inspector,
    *,
    token: str | None = None,
    allowed_hosts: set[str] | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The inspector's Starlette app over ``source``.

    Args:
        source: what the pages read and the actions call.
        token: an access token every request must carry (required beyond loopback).
        allowed_hosts: accepted ``Host`` headers (None: any).
        clock: the time the pages call "now".
    """
    guard = Guard(token, allowed_hosts)
    env = _env()

    def render(request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        cookie = request.cookies.get(CSRF_COOKIE) or guard.new_cookie()
        html = env.get_template(name).render(
            csrf=guard.csrf_for(cookie),
            now=clock(),
            has_store=source.store_url is not None,
            db=source.db,
            **ctx,
        )
        resp = HTMLResponse(html, status_code=status)
        if request.cookies.get(CSRF_COOKIE) != cookie:
            resp.set_cookie(CSRF_COOKIE, cookie, httponly=True, samesite="strict")
        return resp

    def refuse(request: Request, status: int, message: str) -> Response:
        return render(request, "message.html", status=status, ok=False, message=message, back="")

    def guarded(fn: Handler, *, post: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            host = request.headers.get("host", "")
            if not guard.host_ok(host):
                resp: Response = Response(
                    f"host {host!r} is not served here", status_code=421, media_type="text/plain"
                )
            elif not guard.token_ok(
                request.cookies.get(TOKEN_COOKIE),
                request.headers.get("authorization"),
                request.query_params.get("token"),
            ):
                resp = refuse(
                    request, 401, "this inspector needs its access token: open it with ?token=…"
                )
            elif post and not guard.same_origin(
                request.headers.get("origin"),
                request.headers.get("referer"),
                host,
                request.url.scheme,
            ):
                resp = refuse(request, 403, "refused: the form was not sent from this inspector")
            elif post and not guard.csrf_ok(
                request.cookies.get(CSRF_COOKIE),
                (await request.form()).get("csrf"),  # type: ignore[arg-type]
            ):
                resp = refuse(
                    request, 403, "refused: the form's token is missing or stale; reload the page"
                )
            elif token is not None and "token" in request.query_params:
                # the token came in the address: keep it in a cookie and drop it from the URL
                resp = RedirectResponse(request.url.remove_query_params("token"), 303)
                resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            else:
                resp = await fn(request)
            resp.headers.update(HEADERS)
            return resp

        return endpoint

    async def events(request: Request) -> Response:
        """A run's token stream as Server-Sent Events (``_events``: the same frames and
        offsets as the ``TokenStreamApp`` a team mounts in its own service)."""
        run_id = request.path_params["run_id"]
        try:
            after = start_offset(
                request.headers.get("last-event-id"), request.query_params.get("after")
            )
            stream = await run_in_threadpool(
                open_run_stream, source.app, run_id, after, EVENTS_MAX_SECONDS
            )
        except UnknownRunError:
            return Response(f"no run with id {run_id!r}\n", 404, media_type="text/plain")
        except ConfigError as exc:
            return Response(f"{exc}\n", 400, media_type="text/plain")
        return StreamingResponse(event_frames(source.app, stream, run_id), headers=SSE_HEADERS)

    async def index(request: Request) -> Response:
        return RedirectResponse("/runs", 303)

    async def runs(request: Request) -> Response:
        p = request.query_params
        age = p.get("age", "")
        try:
            page = int(p.get("page", "1"))
        except ValueError:
            page = 1
        q = RunsQuery(
            state=p.get("state", ""),
            workflow=p.get("workflow", ""),
            version=p.get("version", ""),
            max_age=_format.AGES.get(age),
            search=p.get("q", ""),
            page=page,
        )
        result = await run_in_threadpool(source.runs_page, q, now=clock())
        return render(request, "runs.html", q=q, age=age, result=result, nav="runs")

    async def run(request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        try:
            view = await run_in_threadpool(source.run, run_id, now=clock())
        except SurefootError as exc:
            return refuse(request, 404, f"surefoot: error: {exc}")
        return render(request, "run.html", v=view, r=view.detail.run, nav="runs")

    async def confirm(request: Request) -> Response:
        p = request.query_params
        action = p.get("do", "")
        if action not in ACTIONS:
            return refuse(request, 400, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        run_id = p.get("id", "")
        try:
            view = await run_in_threadpool(source.run, run_id, now=clock())
        except SurefootError as exc:
            return refuse(request, 404, f"surefoot: error: {exc}")
        return render(
            request,
            "confirm.html",
            action=action,
            r=view.detail.run,
            v=view,
            step=p.get("step", ""),
            nav="runs",
        )

    async def act(request: Request) -> Response:
        f = await request.form()
        g = {k: str(f.get(k) or "") for k in ("id", "do", "reason", "step", "result")}
        g.update({k: str(f.get(k) or "") for k in ("name", "payload", "signal_id", "new_id")})
        run_id, action = g["id"], g["do"]
        back = run_id
        try:
            if action == "retry":
                msg = await run_in_threadpool(source.retry, run_id, g["reason"])
            elif action == "cancel":
                msg = await run_in_threadpool(source.cancel, run_id, g["reason"])
            elif action == "resolve":
                msg = await run_in_threadpool(
                    source.resolve, run_id, g["step"], g["result"], g["reason"]
                )
            elif action == "signal":
                msg = await run_in_threadpool(
                    source.signal, run_id, g["name"], g["payload"], g["signal_id"]
                )
            elif action == "fork":
                back, msg = await run_in_threadpool(source.fork, run_id, g["step"], g["new_id"])
            else:
                return refuse(request, 400, f"unknown action {action!r}")
        except SurefootError as exc:
            return render(
                request,
                "message.html",
                status=409,
                ok=False,
                message=f"surefoot: error: {exc}",
                back=run_id,
            )
        return render(request, "message.html", ok=True, message=msg, back=back)

    async def workers(request: Request) -> Response:
        w = await run_in_threadpool(source.workers, now=clock())
        return render(request, "workers.html", w=w, nav="workers")

    async def state(request: Request) -> Response:
        entries = await run_in_threadpool(source.state)
        return render(
            request, "state.html", entries=entries, namespace=source.namespace, nav="state"
        )

    async def streams(request: Request) -> Response:
        shown = await run_in_threadpool(source.streams)
        return render(request, "streams.html", page=shown, nav="streams")

    async def redrive_confirm(request: Request) -> Response:
        p = request.query_params
        return render(
            request,
            "redrive.html",
            stream=p.get("stream", ""),
            consumer=p.get("consumer", ""),
            seq=p.get("seq", ""),
            nav="streams",
        )

    async def redrive(request: Request) -> Response:
        f = await request.form()
        stream, consumer, seq = (str(f.get(k) or "") for k in ("stream", "consumer", "seq"))
        try:
            seqs = None if seq == "" else [int(seq)]
        except ValueError:
            return refuse(request, 400, f"seq must be a message's sequence number, got {seq!r}")
        try:  # apart: a refused redrive's ConfigError is a ValueError too
            msg = await run_in_threadpool(source.redrive, stream, consumer, seqs)
        except SurefootError as exc:
            return refuse(request, 409, f"surefoot: error: {exc}")
        return render(request, "message.html", ok=True, message=msg, back="", nav="streams")

    async def metrics(request: Request) -> Response:
        text = await run_in_threadpool(source.metrics, now=clock())
        return Response(text, media_type="text/plain; version=0.0.4")

    css = (HERE / "static" / "style.css").read_bytes()

    async def style(request: Request) -> Response:
        return Response(css, media_type="text/css")

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)  # no icon, and no 404 in the browser's console

    routes = [
        Route("/", guarded(index)),
        Route("/runs", guarded(runs)),
        Route("/run", guarded(run)),
        Route("/run/confirm", guarded(confirm)),
        Route("/run/do", guarded(act, post=True), methods=["POST"]),
        Route("/workers", guarded(workers)),
        Route("/state", guarded(state)),
        Route("/streams", guarded(streams)),
        Route("/streams/confirm", guarded(redrive_confirm)),
        Route("/streams/redrive", guarded(redrive, post=True), methods=["POST"]),
        Route("/metrics", guarded(metrics)),
        Route("/events/{run_id:path}", guarded(events)),
        Route("/static/style.css", guarded(style)),
        Route("/favicon.ico", guarded(favicon)),
    ]
    return Starlette(routes=routes)

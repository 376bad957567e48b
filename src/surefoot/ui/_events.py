"""A run's token stream as Server-Sent Events: a small ASGI app with no dependency, which a
team mounts in its own service, and the same stream on ``surefoot ui``.

``GET <mount>/<run_id>`` answers ``text/event-stream``: one frame per event, ``id:`` its
offset, ``event:`` its kind (``start``, ``retry``, ``token``, ``progress``, ``end``) and
``data:`` the event as one line of JSON (the objects ``surefoot runs follow --json``
prints). A client that reconnects sends ``Last-Event-ID`` (browsers' ``EventSource`` does it
by itself) or ``?after=OFFSET`` and gets every later event once. When the run has ended and
its events are sent, a last frame ``event: run-ended`` (no ``id``) carries its status and the
response ends; a response also ends after ``max_seconds`` (the client reconnects from its
last id), so no connection is held forever; a quiet stream sends a ``: keep-alive`` comment
every 15 s, so proxies keep it and a client that left is noticed.

Event data comes from models and tools: it is sent as JSON text, never as markup, and JSON
escapes line breaks, so no value can end a frame or forge another one. The standalone app
checks no credentials: mount it behind your service's own authentication.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

from .. import durable
from ..errors import ConfigError, UnknownRunError

__all__ = [
    "KEEPALIVE",
    "SSE_HEADERS",
    "TokenStreamApp",
    "event_frames",
    "open_run_stream",
    "start_offset",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    "x-accel-buffering": "no",  # proxies (nginx) must not hold frames back
}


def start_offset(last_event_id: str | None, after: str | None) -> int:
    """Where a request starts: its ``Last-Event-ID`` header, else ``?after=``, else 0.

    Raises:
        ConfigError: naming the value, when it is not an offset >= 0.
    """
    for given in (last_event_id, after):
        if given is not None and given.strip():
            text = given.strip()
            if not text.isdigit():
                raise ConfigError(
                    f"Last-Event-ID / after must be an event offset >= 0 (the id of the last "
                    f"event you received), got {given!r}"
                )
            return int(text)
    return 0


def open_run_stream(
    app: durable.App, run_id: str, after: int, max_seconds: float | None
) -> durable.RunStream:
    """Run ``run_id``'s stream after ``after`` (blocking: call it from a thread).

    Raises:
        UnknownRunError: no such run. ConfigError: a journal without token streams.
    """
    return app.handle(run_id).stream(after=after, timeout=max_seconds)


def _frame(ev: durable.StreamEvent) -> bytes:
    return f"id: {ev.offset}\nevent: {ev.kind}\ndata: {ev.to_json()}\n\n".encode()


KEEPALIVE = 15.0
"""Seconds without an event after which a comment line is sent: proxies keep the connection,
and a client that left is noticed (its next write fails)."""


async def event_frames(
    app: durable.App, stream: durable.RunStream, run_id: str, *, keepalive: float = KEEPALIVE
) -> AsyncIterator[bytes]:
    """The SSE frames of ``stream`` (a ``: keep-alive`` comment after ``keepalive`` quiet
    seconds), then ``run-ended`` if the run ended."""
    yield b"retry: 1000\n\n"  # a dropped client reconnects after a second
    events = stream.__aiter__()
    pending: asyncio.Future[durable.StreamEvent] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(events.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=keepalive)
            if not done:
                yield b": keep-alive\n\n"
                continue
            try:
                ev = pending.result()
            except StopAsyncIteration:
                break
            pending = None
            yield _frame(ev)
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
    status = await asyncio.to_thread(app.handle(run_id).status)
    if status in durable.TERMINAL or status == durable.RunStatus.NEEDS_ATTENTION:
        data = json.dumps({"run_id": run_id, "status": status, "last_offset": stream.after})
        yield f"event: run-ended\ndata: {data}\n\n".encode()


class TokenStreamApp:
    """An ASGI app serving the token streams of one journal's runs as SSE (module docs).

    ::

        from surefoot.ui import TokenStreamApp
        app.mount("/streams", TokenStreamApp(durable_app))   # Starlette / FastAPI

    Args:
        source: the ``durable.App`` whose runs are streamed, or its journal URL (opened
            with ``create=False`` when made: a mistyped URL is an error then, not a new journal).
        max_seconds: a response ends after this long (the client resumes from its last
            id); None holds it until the run ends.
        keepalive: seconds without an event after which a ``: keep-alive`` comment is sent.
        max_clients: threads for the followers' waits (each connected client holds one
            while it waits, up to the app's ``poll``); more clients than this wait their turn.
    """

    def __init__(
        self,
        source: durable.App | str,
        *,
        max_seconds: float | None = 300.0,
        keepalive: float = KEEPALIVE,
        max_clients: int = 64,
    ) -> None:
        if isinstance(max_clients, bool) or not isinstance(max_clients, int) or max_clients < 1:
            raise ConfigError(f"max_clients must be an int >= 1, got {max_clients!r}")
        self._owned = isinstance(source, str)  # opened here: closed at lifespan shutdown
        if isinstance(source, str):
            source = durable.App(source, create=False)
            try:
                source.journal  # noqa: B018 - opened now: a wrong URL fails at start, not per client
            except BaseException:
                source.close()
                raise
        self.app = source
        self.max_seconds = max_seconds
        self.keepalive = keepalive
        self._pool = ThreadPoolExecutor(max_clients, thread_name_prefix="surefoot-sse")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            self.close()
            return
        if scope["type"] != "http":
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _plain(send, 405, "only GET: open the stream with GET <mount>/<run_id>")
            return
        path = str(scope.get("path", ""))
        root = str(scope.get("root_path", ""))
        if root and path.startswith(root):
            path = path[len(root) :]
        run_id = path.strip("/")
        if not run_id:
            await _plain(send, 404, "name a run: GET <mount>/<run_id>")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            after = start_offset(headers.get("last-event-id"), (query.get("after") or [None])[0])
            stream = await asyncio.to_thread(
                open_run_stream, self.app, run_id, after, self.max_seconds
            )
        except UnknownRunError:  # its own words: the journal's URL is not the client's business
            await _plain(send, 404, f"no run with id {run_id!r}")
            return
        except ConfigError as exc:
            await _plain(send, 400, str(exc))
            return
        stream.executor = self._pool
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()],
            }
        )
        if scope.get("method") == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        gone = asyncio.create_task(_disconnected(receive))
        try:
            async for frame in event_frames(self.app, stream, run_id, keepalive=self.keepalive):
                if gone.done():
                    return  # the client left: stop reading its run
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            gone.cancel()

    def close(self) -> None:
        """Stop the followers' threads; close the journal if it was opened from a URL here
        (called at the ASGI lifespan's shutdown)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._owned:
            self.app.close()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return

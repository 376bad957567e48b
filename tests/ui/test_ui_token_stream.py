"""A run's token stream as Server-Sent Events: the standalone ASGI app a team mounts, served
live by uvicorn, and the same frames on the inspector; ``id:`` is the offset of
``handle.stream`` and ``surefoot runs follow``, and ``Last-Event-ID`` / ``?after=`` resume."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import BASE, make_client, need_ui_extra

from surefoot.durable import App, emit, step_texts
from surefoot.errors import ConfigError


def _frames(text: str) -> list[dict[str, str]]:
    """Parse an SSE body into frames (field -> value), comments and retry lines left out."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            out.append(fields)
    return out


def _finished_run(db: str) -> list[Any]:
    calls = {"n": 0}
    with App(db, poll=0.01) as app:

        @app.step(retry=2)
        def talk() -> str:
            calls["n"] += 1
            for w in ("one ", "two ", "</script><b>three</b>\ndata: forged\n\n"):
                emit(w)
                if calls["n"] == 1:
                    raise ConnectionError("cut")
            return "one two </script><b>three</b>\ndata: forged\n\n"

        @app.workflow
        def wf() -> str:
            return talk()

        h = app.start(wf, run_id="r1")
        h.result(timeout=10)
        return list(h.stream())


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def test_the_inspector_serves_the_same_offsets_and_resumes(db: str) -> None:
    events = _finished_run(db)
    client = make_client(db)
    r = client.get("/events/r1")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = _frames(r.text)
    assert [int(f["id"]) for f in frames[:-1]] == [e.offset for e in events]
    assert [f["event"] for f in frames[:-1]] == [e.kind for e in events]
    assert frames[-1]["event"] == "run-ended" and "id" not in frames[-1]
    assert json.loads(frames[-1]["data"])["status"] == "succeeded"
    data = [json.loads(f["data"]) for f in frames[:-1]]
    assert "retry" in [d["kind"] for d in data]
    # a hostile token stays one JSON value: it forges no frame and no markup
    assert sum(1 for f in frames if f["data"] == "forged") == 0
    assert step_texts(events)["1"].endswith("data: forged\n\n")
    tail = _frames(client.get("/events/r1", headers={"Last-Event-ID": "4"}).text)
    assert [int(f["id"]) for f in tail[:-1]] == [e.offset for e in events[4:]]
    by_query = _frames(client.get("/events/r1?after=4").text)
    assert by_query == tail


def test_bad_requests_are_clear_and_leak_no_url(db: str) -> None:
    _finished_run(db)
    client = make_client(db)
    r = client.get("/events/nope")
    assert r.status_code == 404 and "nope" in r.text and "sqlite" not in r.text
    r = client.get("/events/r1", headers={"Last-Event-ID": "x1"})
    assert r.status_code == 400 and "'x1'" in r.text
    r = client.get("/events/r1?after=999")  # past the end: was a 200 claiming last_offset 999
    assert r.status_code == 400 and "999" in r.text and "last_offset" not in r.text


def test_the_inspector_wants_its_token_for_streams_too(db: str) -> None:
    _finished_run(db)
    client = make_client(db, token="s3cret")
    assert client.get("/events/r1").status_code == 401
    assert client.get("/events/r1", headers={"authorization": "Bearer s3cret"}).status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(db: str) -> Iterator[tuple[str, App, threading.Event]]:
    """A run whose step emits, then waits for the test, served by TokenStreamApp on uvicorn."""
    need_ui_extra()
    import uvicorn

    from surefoot.ui import TokenStreamApp

    gate = threading.Event()
    app = App(db, poll=0.01)

    @app.step
    def talk() -> str:
        for i in range(5):
            emit(f"a{i} ")
        gate.wait(20)
        for i in range(5):
            emit(f"b{i} ")
        return "".join(f"a{i} " for i in range(5)) + "".join(f"b{i} " for i in range(5))

    @app.workflow
    def wf() -> str:
        return talk()

    app.start(wf, run_id="r1")
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(TokenStreamApp(db), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app, gate
    finally:
        gate.set()
        server.should_exit = True
        thread.join(timeout=10)
        app.close()


def test_a_client_follows_live_drops_and_resumes_by_last_event_id(
    live: tuple[str, App, threading.Event],
) -> None:
    import httpx

    url, app, gate = live
    got: list[dict[str, str]] = []
    with httpx.stream("GET", f"{url}/r1", timeout=20) as r:  # live: the step still runs
        buf = ""
        for chunk in r.iter_text():
            buf += chunk
            got += _frames(buf[: buf.rfind("\n\n") + 2])
            buf = buf[buf.rfind("\n\n") + 2 :]
            if sum(1 for f in got if f["event"] == "token") >= 5:
                break  # the connection drops while the step waits
    assert not gate.is_set() and app.handle("r1").status() == "running"
    last = got[-1]["id"]
    gate.set()
    rest = _frames(httpx.get(f"{url}/r1", headers={"Last-Event-ID": last}, timeout=20).text)
    ids = [int(f["id"]) for f in got + rest if "id" in f]
    assert ids == list(range(1, len(ids) + 1))  # every offset once, across the reconnect
    assert rest[-1]["event"] == "run-ended"
    tokens = "".join(json.loads(f["data"])["data"] for f in got + rest if f["event"] == "token")
    assert tokens == app.handle("r1").result(timeout=10)
    assert [e.offset for e in app.handle("r1").stream()] == ids


def test_the_standalone_app_refuses_what_it_cannot_serve(db: str) -> None:
    need_ui_extra()
    import httpx

    from surefoot.ui import TokenStreamApp

    _finished_run(db)
    app = TokenStreamApp(db)

    async def ask(method: str, path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.request(method, path)

    import asyncio

    assert asyncio.run(ask("POST", "/r1")).status_code == 405
    assert asyncio.run(ask("GET", "/")).status_code == 404
    r = asyncio.run(ask("GET", "/nope"))
    assert r.status_code == 404 and "sqlite" not in r.text
    assert asyncio.run(ask("GET", "/r1?after=-3")).status_code == 400
    ok = asyncio.run(ask("GET", "/r1?after=5"))
    assert [int(f["id"]) for f in _frames(ok.text)[:-1]] == [6, 7, 8]
    with pytest.raises(ConfigError, match="max_clients"):
        TokenStreamApp(db, max_clients=0)


def test_a_quiet_stream_sends_keep_alive_comments(live: tuple[str, App, threading.Event]) -> None:
    """While the step waits, the stream sends comments (never an event without an id)."""
    import asyncio

    from surefoot.ui._events import event_frames

    _, app, gate = live

    async def first_frames() -> list[bytes]:
        stream = app.handle("r1").stream()
        out: list[bytes] = []
        async for frame in event_frames(app, stream, "r1", keepalive=0.05):
            out.append(frame)
            if out.count(b": keep-alive\n\n") == 3:
                break
        return out

    frames = asyncio.run(first_frames())
    assert frames[0] == b"retry: 1000\n\n"
    assert sum(f.startswith(b"id: ") for f in frames) == 6  # start + the 5 tokens before the gate
    assert not gate.is_set()


def test_the_inspector_shows_a_run_of_an_app_with_a_payload_codec(tmp_path: Path) -> None:
    # its values and events are stored through the codec; the inspector opened the journal
    # with none, so the run page and /events refused it ("give it the codec...")
    need_ui_extra()
    from starlette.testclient import TestClient

    from surefoot.durable import ZlibCodec
    from surefoot.ui import Inspector, create_app, loopback_hosts

    db = f"sqlite:///{tmp_path / 'z.db'}"
    zipped = App(db, payload_codec=ZlibCodec())

    @zipped.step
    def say() -> str:
        emit("secret-free text")
        return "secret-free text"

    @zipped.workflow
    def wf() -> str:
        return say()

    assert zipped.start(wf, run_id="z1").result(timeout=10) == "secret-free text"
    plain = make_client(db)
    assert "codec" in plain.get("/run?id=z1").text  # without it: refused, saying why
    source = Inspector(db, app=zipped)
    client = TestClient(create_app(source, allowed_hosts=loopback_hosts(8765)), base_url=BASE)
    page = client.get("/run?id=z1")
    assert page.status_code == 200 and "secret-free text" in page.text
    frames = client.get("/events/z1").text
    assert '"data":"secret-free text"' in frames
    source.close()


def test_the_standalone_app_on_a_wrong_url_fails_when_made_not_at_each_client(
    tmp_path: Path,
) -> None:
    # TokenStreamApp("sqlite:///missing.db") was accepted; every client then got a 400
    # naming the server's own journal URL. A wrong URL is the deployer's error, at start.
    need_ui_extra()
    from surefoot.ui import TokenStreamApp

    missing = tmp_path / "missing.db"
    for url in (f"sqlite:///{missing}", "bogus"):
        with pytest.raises(ConfigError):
            TokenStreamApp(url)
    assert not missing.exists()

"""Durable token streams: what a step emits goes to the run's stream in batches; readers
follow it from an offset; a retried attempt is announced before its tokens; a pruned run's
stream goes with it. On SQLite and PostgreSQL (the ``app`` fixture)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from surefoot.durable import App, Batching, ZlibCodec, emit, step_texts
from surefoot.errors import ConfigError, RunFailedError, UnknownRunError


def _talker(app: App, fail_first_at: int | None = None) -> Any:
    calls = {"n": 0}

    @app.step(retry=3)
    def talk(n: int) -> str:
        calls["n"] += 1
        out = []
        for i in range(n):
            piece = f"w{i} "
            emit(piece)
            out.append(piece)
            if calls["n"] == 1 and fail_first_at is not None and i == fail_first_at:
                raise ConnectionError("cut mid-stream")
        emit({"done": n}, kind="progress")
        return "".join(out)

    @app.workflow
    def wf(n: int) -> str:
        return talk(n)

    return wf


def test_emit_outside_a_step_does_nothing() -> None:
    assert emit("x") is False


def test_a_step_streams_and_its_text_equals_its_result(app: App) -> None:
    wf = _talker(app)
    h = app.start(wf, 100, run_id="r1")
    result = h.result(timeout=10)
    events = list(h.stream())
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-2:] == ["progress", "end"]
    assert kinds.count("token") == 100
    assert [e.offset for e in events] == list(range(1, len(events) + 1))
    assert {e.pos for e in events} == {"1"} and events[0].step == "talk"
    assert events[-1].data == {"ok": True}
    assert step_texts(events) == {"1": result}


def test_a_retried_attempt_is_announced_before_its_tokens(app: App) -> None:
    wf = _talker(app, fail_first_at=4)
    h = app.start(wf, 20, run_id="r1")
    result = h.result(timeout=10)
    events = list(h.stream())
    marks = [(e.kind, e.attempt) for e in events if e.kind not in ("token", "progress")]
    assert marks == [("start", 1), ("end", 1), ("retry", 2), ("end", 2)]
    retry_at = next(e.offset for e in events if e.kind == "retry")
    assert all(e.attempt == 2 for e in events if e.offset > retry_at)
    assert events[retry_at - 2].data == {"ok": False}  # the failed attempt's end
    assert step_texts(events) == {"1": result}


def test_a_reader_resumes_after_an_offset(app: App) -> None:
    wf = _talker(app)
    h = app.start(wf, 50, run_id="r1")
    h.result(timeout=10)
    whole = list(h.stream())
    tail = list(h.stream(after=whole[20].offset))
    assert tail == whole[21:]
    assert list(h.stream(after=str(whole[-1].offset))) == []  # a Last-Event-ID is text


def test_async_iteration_gives_the_same_events(app: App) -> None:
    wf = _talker(app)
    h = app.start(wf, 30, run_id="r1")
    h.result(timeout=10)

    async def read() -> list[Any]:
        return [e async for e in h.stream(after=3)]

    assert asyncio.run(read()) == list(h.stream(after=3))


def test_a_follower_sees_tokens_while_the_step_runs(app: App) -> None:
    """The reader gets the first tokens while the step still waits: they were written
    by the batching rule (time), not at the step's end."""
    go = threading.Event()

    @app.step
    def slow() -> str:
        emit("first ")
        go.wait(10)
        emit("second")
        return "first second"

    @app.workflow
    def wf() -> str:
        return slow()

    h = app.start(wf, run_id="r1")
    seen = []
    for ev in h.stream(timeout=10):
        seen.append(ev)
        if ev.kind == "token" and ev.data == "first ":
            assert not go.is_set()
            go.set()
    assert step_texts(seen) == {"1": h.result(timeout=10)}


def test_batches_cost_one_commit_each(db_url: str, clock: Any) -> None:
    """By count: 100 events, at most 10 per batch, so 10 batches plus the attempt's end
    (writes never wait for time here: max_delay is an hour)."""
    app = App(db_url, clock=clock, poll=0.01, stream_batching=Batching(10, 3600.0))
    try:
        wf = _talker(app)
        h = app.start(wf, 98, run_id="r1")  # start + 98 tokens + progress + end = 101
        h.result(timeout=10)
        assert len(list(h.stream())) == 101
        assert 1 <= app.tokens.commits <= 11
    finally:
        app.close()


def test_a_step_that_emits_nothing_writes_nothing(app: App) -> None:
    @app.step
    def quiet() -> int:
        return 1

    @app.workflow
    def wf() -> int:
        return quiet()

    h = app.start(wf, run_id="r1")
    h.result(timeout=10)
    assert app.tokens.commits == 0
    assert list(h.stream()) == []


def test_async_steps_stream_too(app: App) -> None:
    @app.step
    async def talk() -> str:
        for piece in ("a", "b", "c"):
            emit(piece)
        return "abc"

    @app.workflow
    async def wf() -> str:
        return await talk()

    h = app.start(wf, run_id="r1")
    assert step_texts(list(h.stream(timeout=10))) == {"1": "abc"} == {"1": h.result(timeout=5)}


def test_pruning_a_run_deletes_its_stream(app: App) -> None:
    wf = _talker(app)
    h = app.start(wf, 10, run_id="r1")
    h.result(timeout=10)
    assert app.tokens.log("r1").range(0, 5)
    assert app.prune(keep=0) == ["r1"]
    assert app.tokens.log("r1").range(0, 5) == []
    with pytest.raises(UnknownRunError):
        h.stream()


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: emit("x", kind="shout"), "kind must be 'token' or 'progress'"),
        (lambda: emit(5), "needs text"),
        (lambda: Batching(0), "max_events"),
        (lambda: Batching(5, -1), "max_delay"),
        # NaN and inf were taken: a batch's wait was then never (or always) over
        (lambda: Batching(5, float("nan")), "max_delay"),
        (lambda: Batching(5, float("inf")), "max_delay"),
        # a stream_batching that is not a Batching was taken, to fail at the first emit
        (lambda: App("memory://", stream_batching="fast"), "stream_batching"),
    ],
)
def test_bad_input_is_refused_by_name(call: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        call()


def test_a_bad_offset_is_refused_by_name(app: App) -> None:
    wf = _talker(app)
    h = app.start(wf, 2, run_id="r1")
    h.result(timeout=10)
    for bad in (-1, "abc", 1.5, True):
        with pytest.raises(ConfigError, match="after must be an offset"):
            h.stream(after=bad)
    last = list(h.stream())[-1].offset
    # an offset past the stream's end is no offset a reader was given: refused, naming it
    # and the real end (it used to read nothing and report the bad offset as the last one)
    with pytest.raises(ConfigError, match=rf"after={last + 5}.* last offset is {last}\b"):
        h.stream(after=last + 5)
    assert list(h.stream(after=last)) == []
    with pytest.raises(ConfigError, match="timeout"):
        h.stream(timeout=-1)


def test_data_json_cannot_hold_is_refused_inside_the_step(app: App) -> None:
    @app.step
    def odd() -> None:
        emit(object(), kind="progress")

    @app.workflow
    def wf() -> None:
        odd()

    h = app.start(wf, run_id="r1")
    with pytest.raises(RunFailedError, match="cannot store as JSON"):
        h.result(timeout=10)


def test_events_are_stored_through_the_apps_payload_codec(db_url: str, clock: Any) -> None:
    app = App(db_url, clock=clock, poll=0.01, payload_codec=ZlibCodec())
    try:
        wf = _talker(app)
        h = app.start(wf, 5, run_id="r1")
        result = h.result(timeout=10)
        stored = app.tokens.log("r1").range(0, 100)
        assert stored and all(r.payload.startswith("sfc:zlib:") for r in stored)
        assert step_texts(list(h.stream())) == {"1": result}
    finally:
        app.close()
    with App(db_url, clock=clock) as plain, pytest.raises(ConfigError, match="zlib"):
        list(plain.handle("r1").stream())


def test_a_late_write_of_an_older_attempt_is_dropped_by_the_reader() -> None:
    """A worker that lost its lease (epoch 1) writes after the new owner's retry marker
    (epoch 2): the reader drops the old attempt's late tokens, not the new attempt's."""
    import json as _json

    from surefoot import storage
    from surefoot.durable import RunStream

    log = storage.open("memory://").stream("surefoot.run/r1")

    def ev(epoch: int, kind: str, data: Any = None) -> str:
        return _json.dumps(
            {"step": "s", "pos": "1", "epoch": epoch, "attempt": 1, "kind": kind, "data": data}
            | {"at": 0.0}
        )

    rows = [ev(1, "start"), ev(1, "token", "old "), ev(2, "retry"), ev(1, "token", "late ")]
    rows += [ev(2, "token", "new"), ev(2, "end", {"ok": True})]
    log.append_many([(f"m{i}", p) for i, p in enumerate(rows)], now=0.0)
    events = list(RunStream(log, lambda: "succeeded", "r1"))
    assert [e.offset for e in events] == [1, 2, 3, 5, 6]
    assert step_texts(events) == {"1": "new"}


def test_a_reader_that_resumes_after_a_takeover_still_drops_the_zombies_late_write(
    db_url: str,
) -> None:
    """Two writers as in a takeover: A (epoch 1) streams position 2, is stopped; B (epoch 2)
    writes its retry marker and a token; A wakes and writes its late tokens and end; B
    finishes. A reader that dropped its connection at any offset and resumed with
    ``after=`` that offset hands out exactly what one unbroken reader does: the zombie's late
    write is dropped whether or not the resumed reader saw B's marker itself."""
    from surefoot.durable import RunStream
    from surefoot.durable._tokens import TokenHub

    with App(db_url) as app:
        log = app.tokens.log("r1")
        slow = Batching(max_events=10_000, max_delay=3600.0)  # written only when flushed
        a, b = TokenHub(lambda _: log, slow), TokenHub(lambda _: log, slow)
        run_a = SimpleNamespace(run_id="r1", epoch=1, streaming=False)
        run_b = SimpleNamespace(run_id="r1", epoch=2, streaming=False)

        def say(hub: TokenHub, run: Any, *words: str) -> None:
            for w in words:
                hub.emit(run, "ask", "2", 1, "token", w)

        say(a, run_a, "a0 ", "a1 ")
        a.flush("r1")  # A is stopped here
        say(b, run_b, "b0 ")
        b.flush("r1")  # B took the run over: its retry marker, a token
        say(a, run_a, "a2 ", "a3 ")
        a.end(run_a, "ask", "2", 1, True)  # A wakes: its late write lands after B's marker
        say(b, run_b, "b1")
        b.end(run_b, "ask", "2", 1, True)
        a.close()
        b.close()
        stored = log.range(0, 100)
        ended = lambda: "succeeded"  # noqa: E731
        full = list(RunStream(log, ended, "r1"))
        assert [e.kind for e in full].count("retry") == 1
        assert step_texts(full) == {"2": "b0 b1"}
        late = [r.seq for r in stored if "/1.1/" in r.message_id and r.seq > full[0].offset]
        assert late and not {e.offset for e in full} & set(late[-3:])
        for k in range(len(stored) + 1):
            resumed = [e for e in full if e.offset <= k]
            resumed += RunStream(log, ended, "r1", after=k)
            assert resumed == full, f"resumed after offset {k}"


def test_a_resumed_reader_drops_a_late_write_whatever_the_message_ids() -> None:
    """The same with ids not written by surefoot's writer (the reader reads the events)."""
    import json as _json

    from surefoot import storage
    from surefoot.durable import RunStream

    log = storage.open("memory://").stream("surefoot.run/r1")

    def ev(epoch: int, kind: str, data: Any = None) -> str:
        return _json.dumps(
            {"step": "s", "pos": "1", "epoch": epoch, "attempt": 1, "kind": kind, "data": data}
            | {"at": 0.0}
        )

    rows = [ev(1, "start"), ev(1, "token", "old "), ev(2, "retry"), ev(1, "token", "late ")]
    rows += [ev(2, "token", "new"), ev(2, "end", {"ok": True})]
    log.append_many([(f"m{i}", p) for i, p in enumerate(rows)], now=0.0)
    for k in range(len(rows) + 1):
        events = list(RunStream(log, lambda: "succeeded", "r1", after=k))
        assert [e.offset for e in events] == [o for o in (1, 2, 3, 5, 6) if o > k], k


def test_an_event_over_the_stores_limit_is_refused_in_the_step(tmp_path: Any) -> None:
    """Refused where it is emitted (naming the step), not by the batch it would poison."""
    url = f"sqlite:///{tmp_path / 'runs.db'}?max_value_bytes=2000"
    with App(url, poll=0.01) as app:

        @app.step
        def big() -> None:
            emit("ok ")
            emit("x" * 5000)

        @app.workflow
        def wf() -> None:
            big()

        h = app.start(wf, run_id="r1")
        with pytest.raises(RunFailedError, match="step 'big'"):
            h.result(timeout=10)
        events = list(h.stream())
    assert [e.kind for e in events] == ["start", "token", "end"]
    assert events[-1].data == {"ok": False}

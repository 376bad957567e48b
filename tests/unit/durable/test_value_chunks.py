"""Large step results stored as shared chunks: linear bytes for a growing history, the same
values on replay, one commit per step, codecs, forks and retention (SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker, ZlibCodec
from surefoot.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Message:
    role: str
    content: str


def _chat(app: App, calls: list[int] | None = None) -> Any:
    """An agent loop whose step returns the whole history plus one exchange."""

    @app.step
    def turn(history: list[Message], i: int) -> list[Message]:
        if calls is not None:
            calls.append(i)
        return [
            *history,
            Message("user", f"question {i}: " + "what next? " * 30),
            Message("assistant", f"answer {i}: " + "do this, then that. " * 25),
        ]

    @app.workflow
    def chat(n: int) -> list[Message]:
        history: list[Message] = []
        for i in range(n):
            history = turn(history, i)
        return history

    return chat


def stored(app: App, run_id: str) -> int:
    """Characters of step results in step rows plus characters of chunk data, for a run."""
    j: Any = app.journal.wrapped  # type: ignore[attr-defined]
    ((rows,),) = j.d.read(
        j.d.sql("SELECT COALESCE(SUM(LENGTH(result)), 0) FROM durable_steps WHERE run_id = ?"),
        (run_id,),
    )
    return int(rows) + j.chunks.usage(run_id)[1]


def _app(app: App, **kw: Any) -> App:
    return App(app.url, clock=FakeClock(), poll=0.01, worker_id="w2", **kw)


def test_a_growing_history_is_stored_in_linear_bytes(app: App) -> None:
    """200 turns store less than 2.3x the bytes of 100 turns (plain rows: about 4x)."""
    chat = _chat(app)
    for n in (100, 200):
        assert len(app.start(chat, n, run_id=f"c{n}").result(timeout=60)) == 2 * n
    assert stored(app, "c200") / stored(app, "c100") < 2.3
    plain = _app(app, value_chunks=None)
    try:
        chat = _chat(plain)
        for n in (100, 200):
            plain.start(chat, n, run_id=f"p{n}").result(timeout=60)
        assert stored(plain, "p200") / stored(plain, "p100") > 3.5
        assert stored(plain, "p200") > 10 * stored(app, "c200")
    finally:
        plain.close()


def test_each_chunked_step_is_still_one_commit(app: App) -> None:
    """Chunk rows go in the step's own transaction: 30 large steps cost 30 commits (plus
    the run's creation and finish), as 30 small ones do."""
    chat = _chat(app)
    app.start(chat, 1, run_id="warm").result(timeout=10)
    db = app._storage.db  # type: ignore[union-attr]
    c0 = db.commits
    app.start(chat, 30, run_id="r").result(timeout=30)
    assert db.commits - c0 == 30 + 2
    assert app.journal.chunks.usage("r")[0] > 30  # type: ignore[attr-defined]


def test_replay_reads_the_same_values_and_types(app: App) -> None:
    """A run that crashed after step 40 resumes with the journalled histories: the
    dataclasses come back as dataclasses, equal, and no step runs twice."""
    calls: list[int] = []
    chat = _chat(app, calls)
    app.crash = CrashPlan("after_journal", step="40")
    with pytest.raises(SimulatedCrash):
        app.start(chat, 60, run_id="r").result(timeout=30)
    out = app.resume("r").result(timeout=30)
    assert calls == list(range(60))
    assert len(out) == 120 and all(type(m) is Message for m in out)
    assert out[79] == Message("assistant", "answer 39: " + "do this, then that. " * 25)
    steps = app.show("r").steps
    assert len(steps) == 60
    # the run's view reads the resolved value (as plain JSON data: no annotation there)
    assert steps[-1].result == [dataclasses.asdict(m) for m in out]


def test_values_under_the_threshold_stay_in_their_rows(app: App) -> None:
    @app.step
    def small(i: int) -> list[str]:
        return ["x" * 100] * i

    @app.workflow
    def flow() -> int:
        return sum(len(small(i)) for i in range(20))

    assert app.start(flow, run_id="s").result(timeout=10) == 190
    assert app.journal.chunks.usage("s") == (0, 0)  # type: ignore[attr-defined]


def test_a_codec_encodes_every_leaf(app: App) -> None:
    """With ZlibCodec the chunk leaves are compressed (no plain text in the journal) and the
    values come back; the references and inner nodes are only hashes."""
    coded = _app(app, payload_codec=ZlibCodec())
    try:
        chat = _chat(coded)
        out = coded.start(chat, 40, run_id="z").result(timeout=30)
        assert len(out) == 80
        d: Any = coded.journal.wrapped.d  # type: ignore[attr-defined]
        data = [r[0] for r in d.read("SELECT data FROM durable_chunks")]
        rows = [r[0] for r in d.read("SELECT result FROM durable_steps")]
        assert data and all("question" not in t for t in data + rows)
        leaves = [t for t in data if t.startswith("sfc:zlib:")]
        assert leaves and all(t.startswith("sfc:zlib:") or "," in t or len(t) == 32 for t in data)
        again = coded.show("z").steps[-1].result
        assert again == [dataclasses.asdict(m) for m in out]
    finally:
        coded.close()
    with pytest.raises(ConfigError, match="payload codec 'zlib'"):
        app.show("z")


def test_a_fork_keeps_its_values_after_the_source_is_pruned(app: App) -> None:
    """A fork copies the chunks of the steps it copies: pruning the source leaves the
    fork's values readable."""
    chat = _chat(app)
    out = app.start(chat, 30, run_id="src").result(timeout=30)
    app.clock.advance(10)  # type: ignore[attr-defined]
    assert app.fork("src", "21", new_run_id="f").result(timeout=30) == out
    assert app.prune(keep=1) == ["src"]
    steps = app.show("f").steps
    assert len(steps) == 30 and steps[-1].result == [dataclasses.asdict(m) for m in out]
    assert app.journal.chunks.usage("src") == (0, 0)  # type: ignore[attr-defined]


def test_prune_removes_the_runs_chunks(app: App) -> None:
    chat = _chat(app)
    app.start(chat, 30, run_id="old").result(timeout=30)
    app.start(chat, 30, run_id="kept").result(timeout=30)
    j: Any = app.journal.wrapped  # type: ignore[attr-defined]
    before = j.chunks.usage("kept")
    assert j.chunks.usage("old")[0] > 0
    app.clock.advance(100)  # type: ignore[attr-defined]
    app.start(chat, 30, run_id="new").result(timeout=30)
    assert app.prune(keep=2) == ["old"]
    assert j.chunks.usage("old") == (0, 0)
    assert j.chunks.usage("kept") == before
    assert app.show("kept").steps[-1].result == app.show("new").steps[-1].result


def test_value_chunks_is_checked() -> None:
    for bad in (10, -1, "big", True, 2.5):
        with pytest.raises(ConfigError, match="value_chunks"):
            App("sqlite://", value_chunks=bad)  # type: ignore[arg-type]


def test_concurrent_runs_share_batches_with_their_chunks(app: App) -> None:
    """24 async chat runs on one worker: their chunked steps share group commits (chunks of
    several runs in one transaction; on PostgreSQL without lock-order deadlocks), and each
    run reads back its own history."""

    @app.step
    async def turn(history: list[str], k: int, i: int) -> list[str]:
        return [*history, f"run {k} turn {i}: " + "some words " * 90]

    @app.workflow
    async def chat(k: int, n: int) -> list[str]:
        history: list[str] = []
        for i in range(n):
            history = await turn(history, k, i)
        return history

    runs, turns = 24, 15
    for k in reversed(range(runs)):  # enqueued against run-id order
        app.enqueue(chat, k, turns, run_id=f"c{k:02d}")
    db = app.journal.wrapped.db  # type: ignore[attr-defined]
    before = db.commits
    assert Worker(app, concurrency=runs).run_once(timeout=120) == runs
    assert db.commits - before < runs * turns / 2
    j: Any = app.journal.wrapped  # type: ignore[attr-defined]
    for k in range(runs):
        got = app.show(f"c{k:02d}").steps[-1].result
        assert got == [f"run {k} turn {i}: " + "some words " * 90 for i in range(turns)]
        assert j.chunks.usage(f"c{k:02d}")[0] > 0

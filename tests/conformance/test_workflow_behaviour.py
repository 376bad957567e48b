"""One suite of workflow behaviours, run on every engine (embedded SQLite and Temporal).

Each test writes the workflow once (``_conformance_flows``) and checks what a user relies
on: results, replay without repeated steps, idempotency keys, retries, timers, signals
(a repeated signal id is not delivered twice), sagas and their audit, ``gather``, versions,
non-determinism and bad input. Where an engine behaves differently by design, the test
says which and why (docs/engines.md lists the same).
"""

from __future__ import annotations

from typing import Any

import pytest
from _conformance_flows import build, build_v2_only
from _conformance_support import Harness, until

from surefoot import durable
from surefoot.errors import (
    ConfigError,
    EncodeError,
    JournalError,
    RunConflictError,
    RunFailedError,
    UnknownRunError,
    WorkflowNotFoundError,
)


def test_results_come_back_with_each_step_run_once(engine: Harness) -> None:
    """A three-step run returns its value; each step ran once; a dataclass reaches the next step."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    out = app.start(f.results, "sky", run_id="res-1").result(timeout=60)
    assert out["topics"] == ["sky-a", "sky-b"]
    assert out["text"] == "sky-a=5" and out["score"] == 5.0
    assert calls == [("plan", "sky"), ("score", "sky-a"), ("describe", "Finding")]


def test_starting_the_same_run_id_again_returns_the_same_run(engine: Harness) -> None:
    """Same run id and arguments: the same result, nothing run again; other arguments: refused."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    first = app.start(f.results, "sea", run_id="same-1").result(timeout=60)
    again = app.start(f.results, "sea", run_id="same-1").result(timeout=60)
    assert again == first and len(calls) == 3
    with pytest.raises(RunConflictError, match="same-1"):
        app.start(f.results, "land", run_id="same-1")


def test_a_new_worker_replays_without_repeating_steps(engine: Harness) -> None:
    """The worker stops while the run waits; a new one finishes it; no completed step runs twice."""
    calls: list[Any] = []
    first = engine.app()
    f1 = build(first, calls)
    first.start(f1.replay, "tide", run_id="rep-1")
    until(lambda: len(calls) == 2, "the first two steps")
    first.close()  # the worker dies with the run suspended in its wait
    second = engine.app()
    f2 = build(second, calls)
    handle = second.start(f2.replay, "tide", run_id="rep-1")  # the same run, served here
    assert second.signal("rep-1", "go", "now") is True
    assert handle.result(timeout=60) == ["tide-a", "tide-b", "tide-a=6", "now"]
    assert calls == [("plan", "tide"), ("score", "tide-a"), ("describe", "Finding")]


def test_effects_get_run_id_and_position_as_key(engine: Harness) -> None:
    """An effect's key is f"{run_id}:{pos}", by position in the run, the same on both engines."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    out = app.start(f.keys, "hi", run_id="key-1").result(timeout=60)
    assert out == ["sent hi as key-1:2", "sent hi! as key-1:3"]
    assert [c for c in calls if c[0] == "send"] == [("send", "key-1:2", 1), ("send", "key-1:3", 1)]


def test_retries_follow_the_steps_policy_with_one_key(engine: Harness) -> None:
    """A step failing twice succeeds on attempt 3 of its RetryPolicy, with the same key each time;
    one needing 4 attempts fails the run with the step's own error."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    assert app.start(f.retries, 3, run_id="try-1").result(timeout=60) == 3
    assert calls == [("flaky", 1, "try-1:1"), ("flaky", 2, "try-1:1"), ("flaky", 3, "try-1:1")]
    with pytest.raises(RunFailedError) as info:
        app.start(f.retries, 4, run_id="try-2").result(timeout=60)
    assert info.value.status == "failed"
    assert "Flaky" in str(info.value.error) and "attempt 3" in str(info.value.error)
    assert len(calls) == 6


def test_a_durable_timer_resumes_the_run(engine: Harness) -> None:
    """app.sleep suspends the run between two steps; it resumes and finishes."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    assert app.start(f.timer, 0.5, run_id="tim-1").result(timeout=60) == "before-a after-a"
    assert calls == [("plan", "before"), ("plan", "after")]


def test_a_repeated_signal_id_is_delivered_once(engine: Harness) -> None:
    """The same signal_id sent twice reaches one wait_for: the second wait times out."""
    app = engine.app()
    f = build(app, [])
    handle = app.start(f.signals, run_id="sig-1")
    assert app.signal("sig-1", "note", {"from": "ann"}, signal_id="n-1") is True
    assert app.signal("sig-1", "note", {"from": "ann"}, signal_id="n-1") is False
    assert handle.result(timeout=60) == [{"from": "ann"}, "no second note"]
    assert app.signal("sig-1", "note", "late", signal_id="n-1") is False  # ended, seen before
    with pytest.raises(JournalError, match="ended"):
        app.signal("sig-1", "note", "late", signal_id="n-2")


def test_a_signal_sent_before_the_wait_is_kept(engine: Harness) -> None:
    """Two different signal ids feed two waits, the first sent before the run waits."""
    app = engine.app()
    f = build(app, [])
    handle = app.enqueue(f.signals, run_id="sig-2")  # nobody runs it yet
    assert app.signal("sig-2", "note", 1, signal_id="a") is True
    assert app.signal("sig-2", "note", 2, signal_id="b") is True
    handle = app.start(f.signals, run_id="sig-2")  # now run it here
    assert handle.result(timeout=60) == [1, 2]


def test_a_typed_wait_reads_the_payload_as_its_type(engine: Harness) -> None:
    """wait_for(type=Finding) gets a Finding from the signal's JSON, on either engine."""
    app = engine.app()
    f = build(app, [])
    handle = app.start(f.typed_signal, run_id="sig-3")
    app.signal("sig-3", "finding", {"topic": "tides", "score": 2.0})
    assert handle.result(timeout=60) == "Finding tides"


def test_a_saga_undoes_effects_newest_first_and_audits_it(engine: Harness) -> None:
    """A failure after two bookings undoes both, newest first, with their keys; the run ends
    failed and its audit lists what was undone."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    handle = app.start(f.saga, ["hotel", "car"], run_id="sag-1")
    with pytest.raises(RunFailedError) as info:
        handle.result(timeout=60)
    assert info.value.status == "failed"
    undos = [c for c in calls if c[0] == "unbook"]
    assert undos == [
        ("unbook", "car", "sag-1:2.undo", "booking car"),
        ("unbook", "hotel", "sag-1:1.undo", "booking hotel"),
    ]
    audit = engine.audit(app, handle)
    assert [a for a, _ in audit] == ["compensated", "compensated", "failed"]
    assert audit[-1][1]["undone"] == [
        {"pos": "2", "step": "book", "compensation": "unbook"},
        {"pos": "1", "step": "book", "compensation": "unbook"},
    ]
    assert "the trip fell through" in audit[-1][1]["error"]


def test_a_failed_compensation_escalates_with_what_was_not_undone(engine: Harness) -> None:
    """A compensation failing for good stops the rollback: needs_attention, with the audit of
    what was undone, what failed and what was not undone."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    handle = app.start(f.saga, ["hotel", "stuck", "car"], run_id="sag-2")
    with pytest.raises(RunFailedError) as info:
        handle.result(timeout=60)
    assert info.value.status == "needs_attention"
    assert [c[1] for c in calls if c[0] == "unbook"] == ["car", "stuck", "stuck"]  # 2 attempts
    audit = engine.audit(app, handle)
    assert [a for a, _ in audit] == ["compensated", "compensation_failed", "needs_attention"]
    detail = audit[-1][1]
    assert [e["pos"] for e in detail["undone"]] == ["3"]
    assert detail["failed"]["pos"] == "2" and "cannot cancel stuck" in detail["failed"]["error"]
    assert [e["pos"] for e in detail["not_undone"]] == ["2", "1"]


def test_gather_runs_steps_together_with_positions_in_call_order(engine: Harness) -> None:
    """asyncio.gather of steps returns results in argument order; effects keyed by call order."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    out = app.start(f.fan_out, ["a", "b", "c"], run_id="fan-1").result(timeout=60)
    assert out[:3] == [["a-a", "a-b"], ["b-a", "b-b"], ["c-a", "c-b"]]
    assert out[3:] == ["sent x as fan-1:4", "sent y as fan-1:5"]
    assert sorted(c[1] for c in calls if c[0] == "plan") == ["a", "b", "c"]


def test_new_runs_use_the_latest_version_old_runs_keep_theirs(engine: Harness) -> None:
    """A run begun on version 1 finishes on version 1 while new runs get version 2."""
    app = engine.app()
    f = build(app, [])
    old = app.start(f.versioned_v1, "q", run_id="ver-1")
    new = app.start("versioned", "q", run_id="ver-2")
    app.signal("ver-1", "go", None)
    app.signal("ver-2", "go", None)
    assert old.result(timeout=60) == "v1 q-a"
    assert new.result(timeout=60) == "v2 q"
    assert new.info().version == "2" and old.info().version == "1"


def test_a_run_whose_version_is_gone_is_not_retried_forever(engine: Harness) -> None:
    """Workers that lack a run's version: embedded keeps it pending (stranded, no worker claims
    it); Temporal fails it at once as needs_attention with surefoot's message."""
    first = engine.app()
    f1 = build(first, [])
    first.enqueue(f1.versioned_v1, "q", run_id="ver-3")  # left for workers
    first.close()
    second = engine.app()
    f2 = build_v2_only(second, [])
    if engine.name == "sqlite":
        durable.Worker(second).run_once()
        assert second.handle("ver-3").status() == "pending"
        assert second.show("ver-3").stranded is True
        return
    second.start(f2.versioned_v2, "other", run_id="ver-4")  # serves the queue here
    with pytest.raises(RunFailedError) as info:
        second.handle("ver-3").result(timeout=60)
    assert info.value.status == "needs_attention"
    assert "version '1'" in str(info.value) and "versions here: 2" in str(info.value)


def test_workflow_code_reading_the_clock(engine: Harness) -> None:
    """time.time() in workflow code: Temporal fails the run with NondeterminismError's message
    (no task retried forever) and undoes the effect before it; the embedded journal replays
    by position and allows it."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    handle = app.start(f.clock_read, run_id="nd-1")
    if engine.name == "sqlite":
        assert isinstance(handle.result(timeout=60), float)
        return
    with pytest.raises(RunFailedError) as info:
        handle.result(timeout=60)
    assert info.value.status == "failed"
    assert info.value.error["t"] == "surefoot.errors.NondeterminismError"
    assert "time.time()" in info.value.error["message"]
    assert "in a step" in info.value.error["message"]
    assert [c[:2] for c in calls] == [("book", "seat"), ("unbook", "seat")]
    assert [a for a, _ in engine.audit(app, handle)] == ["compensated", "failed"]


def test_bad_input_is_refused_clearly(engine: Harness) -> None:
    """Unencodable arguments, unknown workflows, unknown runs: clear errors, nothing started."""
    app = engine.app()
    f = build(app, [])
    with pytest.raises(EncodeError, match="results"):
        app.start(f.results, object(), run_id="bad-1")
    with pytest.raises(WorkflowNotFoundError, match="nope"):
        app.start("nope", run_id="bad-2")
    with pytest.raises(UnknownRunError, match="bad-3"):
        app.signal("bad-3", "go", None)
    with pytest.raises(UnknownRunError, match="bad-1"):
        app.handle("bad-1")
    with pytest.raises(ConfigError, match="run_id"):
        app.start(f.results, "x", run_id="")

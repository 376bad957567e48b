"""check_steps: no journalled step runs again, one key per step, each key applied once at the
recipient; each anomaly has a hand-made history, and a crashed and resumed run passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.testing.checkers import check_steps
from surefoot.testing.history import Client, History, Recorder, record_journal, recorded_step


def rec(kind: str, p: Any, f: str, value: Any) -> str:
    return json.dumps({"type": kind, "process": p, "f": f, "value": value})


def exec_(p: Any, run: str, pos: str, key: str | None = None) -> list[str]:
    v = {"run": run, "step": "charge", "pos": pos, "key": key or f"{run}:{pos}"}
    return [rec("invoke", p, "exec", v), rec("ok", p, "exec", v)]


def journal(p: Any, run: str, **steps: str) -> list[str]:
    """A journal read: ``pos=digest`` for each step seen done (``pos`` written as ``s1``)."""
    seen = {k[1:]: {"name": "charge", "status": "done", "digest": d} for k, d in steps.items()}
    return [
        rec("invoke", p, "journal", {"run": run}),
        rec("ok", p, "journal", {"run": run, "steps": seen}),
    ]


def apply(p: Any, key: str, applied: bool = True) -> list[str]:
    return [
        rec("invoke", p, "apply", {"key": key}),
        rec("ok", p, "apply", {"key": key, "applied": applied}),
    ]


def H(*parts: list[str]) -> History:
    return History.loads("\n".join(line for part in parts for line in part))


def test_a_rerun_before_the_journal_with_a_deduplicated_effect_passes() -> None:
    """A crash between the effect and its journal row reruns the step with the same key; the
    recipient recognises the key: valid, and the rerun is counted."""
    h = H(
        exec_(0, "r", "1"),
        apply(9, "r:1"),
        exec_(1, "r", "1"),
        apply(9, "r:1", applied=False),
        journal(2, "r", s1="d1"),
    )
    res = check_steps(h)
    assert res.valid, res
    assert res.stats["executed_again"] == 1 and res.stats["journalled"] == 1


CASES = [
    ("executed-after-journal", [exec_(0, "r", "1"), journal(1, "r", s1="d1"), exec_(2, "r", "1")]),
    ("key-changed", [exec_(0, "r", "1", key="r:1"), exec_(1, "r", "1", key="r:1-retry")]),
    ("applied-twice", [exec_(0, "r", "1"), apply(9, "r:1"), apply(9, "r:1")]),
    ("journal-changed", [journal(1, "r", s1="d1"), journal(1, "r", s1="d2")]),
    ("journal-changed", [journal(1, "r", s1="d1"), journal(1, "r")]),
]


@pytest.mark.parametrize(
    ("kind", "parts"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)]
)
def test_each_anomaly_is_flagged(kind: str, parts: list[list[str]]) -> None:
    """The hand-made history of each anomaly is invalid with that kind named."""
    res = check_steps(H(*parts))
    assert kind in res.kinds(), res


class Recipient:
    """An outside service that records each effect it receives as an ``apply`` operation and,
    given a key, applies it once."""

    def __init__(self, recorder: Recorder, dedup: bool) -> None:
        self.client: Client = recorder.client()
        self.dedup = dedup
        self.seen: set[str] = set()

    def charge(self, key: str | None, run: str) -> str:
        ident = key if key is not None else f"{run}:charge"
        self.client.invoke("apply", {"key": ident})
        fresh = not (self.dedup and key in self.seen)
        if key is not None:
            self.seen.add(key)
        self.client.ok({"key": ident, "applied": fresh})
        return "charged"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = App(f"sqlite:///{tmp_path / 'runs.db'}", clock=FakeClock(), poll=0.01, worker_id="w")
    yield a
    a.close()


def crash_and_resume(app: App, recorder: Recorder, strategy: str, dedup: bool) -> History:
    """Run a one-effect workflow that crashes after its effect, resume it, read its journal."""
    svc = Recipient(recorder, dedup)

    @app.step(effect=True)
    @recorded_step(recorder)
    def charge(what: str, *, key: str | None) -> str:
        return svc.charge(key, "o")

    @app.workflow
    def order(what: str) -> str:
        return charge(what)

    app.crash = CrashPlan("after_effect", step="charge")
    with pytest.raises(SimulatedCrash):
        app.start(order, "book", run_id="o", strategy=strategy).result(timeout=10)
    app.crash = None
    assert app.resume("o").result(timeout=10) == "charged"
    c = recorder.client()
    record_journal(c, app, "o")
    record_journal(c, app, "o")
    return recorder.history()


def test_a_crashed_effect_resumed_with_its_key_passes(app: App) -> None:
    """With keys, the resumed effect is run again under the same key and the recipient
    applies it once: valid, one re-execution before the journal, one step journalled."""
    h = crash_and_resume(app, Recorder(name="keys"), "journal_keys", dedup=True)
    res = check_steps(h)
    assert res.valid, res
    assert res.stats == {
        "executions": 2,
        "steps": 1,
        "executed_again": 1,
        "journalled": 1,
        "applied": 1,
    }
    execs = [p for p in h.pairs() if p.f == "exec"]
    assert {p.value["key"] for p in execs} == {"o:1"} and execs[0].value["epoch"] is not None


def test_a_crashed_effect_resumed_without_a_key_is_applied_twice(app: App) -> None:
    """The journal strategy gives no key, so the recipient cannot tell the rerun from a new
    effect: the checker reports the effect applied twice."""
    res = check_steps(crash_and_resume(app, Recorder(name="nokeys"), "journal", dedup=True))
    assert res.kinds() == {"applied-twice": 1}, res

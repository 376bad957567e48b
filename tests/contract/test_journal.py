"""Journal contract: one suite for every backend that offers the durable ``Journal``.

Every test runs on SQLite and PostgreSQL (``JOURNAL_BACKENDS``; memory and Redis refuse to
hold a journal): the same answers for every operation over seeded random sequences, fenced
zombie writes, one commit per journalled step and per batch, a batch that may be sent
twice, disjoint claims from several processes, and ``durable.App`` end to end. PostgreSQL
comes from the service fixture, which skips when the server is absent (and fails under
``SUREFOOT_REQUIRE_SERVICES=1``). PostgreSQL-only behaviour (one statement per step,
``SKIP LOCKED``, ``NOTIFY``) is in ``test_postgres_journal.py``.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import durable, storage
from surefoot.errors import ConfigError, JournalError
from surefoot.storage.runs import RunRow, RunWrite, StepWrite

JOURNAL_BACKENDS = ["sqlite", "postgresql"]
WORKFLOWS = [("wf", "1"), ("other", "2")]


@pytest.fixture(params=JOURNAL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh storage URL on each journal backend (a scratch schema on PostgreSQL)."""
    return backend_url(request.param, tmp_path, request, "journal")


@pytest.fixture
def st(url: str) -> Iterator[Any]:
    """The opened storage of ``url``."""
    s = storage.open(url)
    yield s
    s.close()


def _norm(value: Any) -> Any:
    """Backend-assigned row ids differ (PostgreSQL identities have gaps); compare the rest."""
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_norm(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.asdict(value)
        fields.pop("seq", None)
        return (type(value).__name__, fields)
    return value


class Model:
    """Drives one journal with a seeded operation sequence; remembers epochs it was given."""

    def __init__(self, journal: Any) -> None:
        self.j = journal
        self.epochs: dict[str, list[int]] = {}

    def apply(self, op: tuple[Any, ...], now: float) -> Any:
        j, name = self.j, op[0]
        try:
            if name == "create":
                _, run_id, wf, status = op
                row = RunRow(
                    run_id, wf[0], wf[1], "h", "[[], {}]", "journal_keys", status, now, now
                )
                return j.create_run(row)
            if name == "claim":
                _, owner, lease, limit, run_id, force = op
                got = j.claim(
                    owner,
                    now=now,
                    lease_until=now + lease,
                    workflows=WORKFLOWS if run_id is None else [],
                    limit=limit,
                    run_id=run_id,
                    force=force,
                )
                for r, e in got:
                    self.epochs.setdefault(r, []).append(e)
                return sorted(got)
            if name in ("step", "finish", "sleep", "batch"):
                return j.commit(self._records(op, now))
            if name == "heartbeat":
                runs = [(r, es[-1]) for r, es in sorted(self.epochs.items())][: op[1]]
                return j.heartbeat("w", runs, lease_until=now + 5, now=now)
            if name == "operator":
                _, run_id, status, froms, reset = op
                return j.operator(
                    run_id,
                    status=status,
                    from_statuses=froms,
                    now=now,
                    actor="op",
                    action="moved",
                    detail="{}",
                    reset_steps=reset,
                )
            if name == "signal":
                _, run_id, sig, sid = op
                return j.signal(run_id, sig, f'"{sid}"', now=now, signal_id=sid)
            if name == "pending_signal":
                got = j.pending_signal(op[1], op[2])
                return None if got is None else got[1]
            if name == "fork":
                return j.fork(op[1], op[2], op[3], now=now)
            if name == "register":
                j.register_worker(op[1], op[2], now=now)
                return j.live_workflows(since=now - 3)
            if name == "audit":
                j.audit(op[1], actor="x", action="note", detail='{"n": 1}', now=now)
                return None
            if name == "read":
                run_id = op[1]
                return (
                    j.get_run(run_id),
                    j.steps(run_id),
                    j.audit_log(run_id),
                    j.list_runs(limit=50),
                    j.list_runs(status="running", limit=50),
                    j.list_runs(workflow="other", limit=50),
                )
        except (JournalError, ConfigError, KeyError) as exc:
            return (type(exc).__name__, str(exc).replace(j.url, "URL"))
        raise AssertionError(op)

    def _epoch(self, run_id: str, stale: bool) -> int:
        es = self.epochs.get(run_id, [0])
        return es[0] - 1 if stale and es else es[-1]

    def _records(self, op: tuple[Any, ...], now: float) -> list[StepWrite | RunWrite]:
        name = op[0]
        if name == "batch":
            return [r for sub in op[1] for r in self._records(sub, now)]
        _, run_id, stale = op[:3]
        epoch = self._epoch(run_id, stale)
        if name == "step":
            pos, status, consume = op[3:]
            sig = None
            if consume:
                got = self.j.pending_signal(run_id, "go")
                sig = got[0] if got else None
            return [
                StepWrite(
                    run_id,
                    epoch,
                    pos,
                    f"s{pos}",
                    "pure",
                    status,
                    f'"{pos}"',
                    None,
                    1,
                    now,
                    now if status == "done" else None,
                    consume_signal=sig,
                )
            ]
        if name == "finish":
            return [
                RunWrite(run_id, epoch, op[3], now, "w", result='"r"', audit=[("finished", "{}")])
            ]
        wake, waiting = op[3:]
        return [
            RunWrite(
                run_id,
                epoch,
                "sleeping",
                now,
                "w",
                wake_at=None if wake is None else now + wake,
                waiting_for=waiting,
                audit=[("slept", "{}")],
            )
        ]


def _ops(seed: int, n: int = 160) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    runs = [f"r{i}" for i in range(6)]
    ops: list[tuple[Any, ...]] = []

    def step() -> tuple[Any, ...]:
        return (
            "step",
            rng.choice(runs),
            rng.random() < 0.2,
            str(rng.randrange(1, 6)),
            rng.choice(["done", "done", "intent", "error"]),
            rng.random() < 0.2,
        )

    for i in range(n):
        r = rng.random()
        run = rng.choice(runs)
        if r < 0.12:
            ops.append(
                (
                    "create",
                    run,
                    rng.choice(WORKFLOWS),
                    rng.choice(["pending", "pending", "sleeping"]),
                )
            )
        elif r < 0.25:
            target = rng.choice([None, None, run])
            ops.append(
                (
                    "claim",
                    rng.choice(["w", "v"]),
                    rng.choice([1.0, 4.0]),
                    rng.randrange(1, 4),
                    target,
                    target is not None and rng.random() < 0.5,
                )
            )
        elif r < 0.45:
            ops.append(step())
        elif r < 0.5:
            ops.append(
                (
                    "finish",
                    run,
                    rng.random() < 0.2,
                    rng.choice(["succeeded", "failed", "needs_attention"]),
                )
            )
        elif r < 0.56:
            ops.append(
                (
                    "sleep",
                    run,
                    rng.random() < 0.2,
                    rng.choice([None, 0.5, 3.0]),
                    rng.choice([None, "go"]),
                )
            )
        elif r < 0.62:
            ops.append(("batch", [step(), step(), ("finish", run, False, "succeeded")]))
        elif r < 0.66:
            ops.append(("heartbeat", rng.randrange(0, 4)))
        elif r < 0.71:
            ops.append(
                (
                    "operator",
                    run,
                    rng.choice(["pending", "cancelled"]),
                    ("needs_attention", "failed", "running"),
                    rng.choice([None, ["1", "2"]]),
                )
            )
        elif r < 0.78:
            ops.append(
                (
                    "signal",
                    run,
                    rng.choice(["go", "stop"]),
                    rng.choice([None, f"s{rng.randrange(3)}"]),
                )
            )
        elif r < 0.8:
            ops.append(("pending_signal", run, "go"))
        elif r < 0.83:
            ops.append(("fork", run, f"f{i}", str(rng.randrange(1, 4))))
        elif r < 0.86:
            ops.append(
                ("register", rng.choice(["a", "b"]), rng.sample(WORKFLOWS, rng.randrange(0, 3)))
            )
        elif r < 0.88:
            ops.append(("audit", run))
        else:
            ops.append(("read", run))
    return ops


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_journal_matches_sqlite(st: Any, seed: int) -> None:
    """Runs, claims, fenced steps and run writes, heartbeats, operators, signals, forks,
    workers and the audit log answer exactly as on a reference SQLite file over a seeded
    random sequence."""
    ref, mine = Model(storage.open("sqlite://").journal()), Model(st.journal())
    rng = random.Random(seed)
    now = 1_764_500_000.0
    for op in _ops(seed):
        now += rng.choice([0.0, 0.5, 2.0])
        assert _norm(mine.apply(op, now)) == _norm(ref.apply(op, now)), op
    for run in [f"r{i}" for i in range(6)]:
        assert _norm(mine.apply(("read", run), now)) == _norm(ref.apply(("read", run), now))


def _claimed(st: Any, run: str = "r") -> tuple[Any, int]:
    j = st.journal()
    j.create_run(RunRow(run, "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    ((_, epoch),) = j.claim("w1", now=2.0, lease_until=10.0, workflows=[("wf", "1")], limit=1)
    return j, epoch


def _step(run: str, epoch: int, pos: str) -> StepWrite:
    return StepWrite(run, epoch, pos, "s", "pure", "done", '"x"', None, 1, 3.0, 3.0)


def test_a_step_is_one_commit_and_a_batch_is_one_commit(st: Any) -> None:
    """Journalling one step commits once; a batch of steps and a finish commits once."""
    j, epoch = _claimed(st)
    c0 = st.db.commits
    assert j.commit([_step("r", epoch, "1")]) == [True]
    assert st.db.commits - c0 == 1
    finish = RunWrite("r", epoch, "succeeded", 5.0, "w1", result='"z"', audit=[("done", "{}")])
    assert j.commit([_step("r", epoch, "2"), _step("r", epoch, "3"), finish]) == [True] * 3
    assert st.db.commits - c0 == 2
    assert [s.pos for s in j.steps("r")] == ["1", "2", "3"]


def test_a_batch_sent_twice_changes_nothing_the_second_time(st: Any) -> None:
    """Re-sending a group commit after a lost reply leaves one step row and one audit entry."""
    j, epoch = _claimed(st)
    finish = RunWrite("r", epoch, "succeeded", 5.0, "w1", result='"z"', audit=[("done", "{}")])
    batch: list[StepWrite | RunWrite] = [_step("r", epoch, "1"), finish]
    assert j.commit(batch) == [True, True]
    before = (j.steps("r"), j.get_run("r"))
    assert j.commit(batch) == [True, True]
    assert (j.steps("r"), j.get_run("r")) == before
    assert [a.action for a in j.audit_log("r")] == ["created", "claimed", "done"]


def test_a_runs_end_alone_sent_twice_appends_its_audit_once(st: Any) -> None:
    """A run's end committed by itself (the common finish) applies once: sent again after a
    lost reply it changes nothing; its audit entries land in order, a repeated one once."""
    j, epoch = _claimed(st)
    audit = [("claimed", '{"w": "é"}'), ("done", '"\\u0000 \\"q\\""'), ("claimed", '{"w": "é"}')]
    finish = RunWrite("r", epoch, "succeeded", 5.0, "w1", result='"z"', audit=audit)
    c0 = st.db.commits
    assert j.commit([finish]) == [True]
    assert st.db.commits - c0 == 1
    before = j.get_run("r")
    assert j.commit([finish]) == [True]
    assert j.get_run("r") == before
    assert before is not None and (before.status, before.result, before.owner) == (
        "succeeded",
        '"z"',
        None,
    )
    log = [(a.action, a.detail, a.actor, a.at) for a in j.audit_log("r")][-2:]
    assert log == [("claimed", audit[0][1], "w1", 5.0), ("done", audit[1][1], "w1", 5.0)]


def test_zombie_write_after_takeover_is_refused(st: Any) -> None:
    """Once another worker claims an expired lease, the old holder's writes change nothing."""
    j, old = _claimed(st)
    assert j.commit([_step("r", old, "1")]) == [True]
    ((_, new),) = j.claim("w2", now=11.0, lease_until=20.0, workflows=[("wf", "1")], limit=1)
    assert new == old + 1
    assert j.commit([_step("r", old, "2")]) == [False]
    finish = RunWrite("r", old, "succeeded", 12.0, "w1", result='"z"', audit=[("done", "{}")])
    assert j.commit([finish]) == [False]
    assert [s.pos for s in j.steps("r")] == ["1"]
    run = j.get_run("r")
    assert run is not None and run.status == "running" and run.owner == "w2"
    assert [a.action for a in j.audit_log("r")] == ["created", "claimed", "taken_over"]


def test_a_claim_audits_itself_in_its_own_commit(st: Any) -> None:
    """Each claim (a queue poll, one run, a forced one) writes claimed, or taken_over with
    the previous epoch after a lease ran out, in the claim's commit: one commit per claim
    that took runs, none for an idle poll."""
    j = st.journal()
    for rid in ("a", "b"):
        j.create_run(RunRow(rid, "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    c0 = st.db.commits
    got = j.claim("w1", now=2.0, lease_until=10.0, workflows=[("wf", "1")], limit=5)
    assert sorted(got) == [("a", 1), ("b", 1)]
    assert st.db.commits - c0 == 1  # two runs claimed and audited: one commit
    assert j.claim("w2", now=3.0, lease_until=10.0, workflows=[("wf", "1")], limit=5) == []
    assert st.db.commits - c0 == 1  # an idle poll commits nothing and audits nothing
    assert j.claim("w2", now=11.0, lease_until=30.0, workflows=[], limit=1, run_id="a")
    assert st.db.commits - c0 == 2
    a = j.audit_log("a")
    assert [(e.action, e.actor) for e in a] == [
        ("created", "app"),
        ("claimed", "w1"),
        ("taken_over", "w2"),
    ]
    claimed, taken = json.loads(a[1].detail), json.loads(a[2].detail)
    assert claimed == {"worker": "w1", "epoch": 1, "claims": 1, "claimed_at": 2.0}
    assert a[1].at == 2.0 and a[2].at == 11.0
    assert taken["worker"] == "w2" and taken["epoch"] == 2 and taken["previous_epoch"] == 1
    assert taken["claims"] == 2 and "epoch 1 finished or suspended" in taken["why"]
    assert taken["reason"] == "lease_expired" and "lease had run out" in taken["why"]
    assert [e.action for e in j.audit_log("b")] == ["created", "claimed"]


def _claim_all(url: str, owner: str, barrier: Any) -> list[str]:
    st = storage.open(url)
    j = st.journal()
    got: list[str] = []
    barrier.wait(30)  # start claiming together, so the claims really race
    while True:
        batch = j.claim(owner, now=5.0, lease_until=100.0, workflows=[("wf", "1")], limit=1)
        if not batch:
            break
        got += [r for r, _ in batch]
    st.close()
    return got


def test_workers_in_several_processes_claim_disjoint_runs(url: str) -> None:
    """Four processes claiming 200 pending runs at once get each run exactly once (and on
    PostgreSQL every process gets some)."""
    st = storage.open(url)
    try:
        j = st.journal()
        for i in range(200):
            j.create_run(RunRow(f"r{i}", "wf", "1", "h", "[]", "journal_keys", "pending", i, i))
        ctx = mp.get_context("spawn")
        with ctx.Manager() as manager, ctx.Pool(4) as pool:
            barrier = manager.Barrier(4)
            results = pool.starmap(_claim_all, [(url, f"w{k}", barrier) for k in range(4)])
        claimed = [r for got in results for r in got]
        assert sorted(claimed) == sorted(f"r{i}" for i in range(200))
        if url.startswith("postgresql"):
            # SKIP LOCKED lets every worker claim side by side; SQLite's claims take turns
            # on the write lock, so a late starter may find the queue already empty.
            assert all(results)  # every worker got some: they claimed side by side
    finally:
        st.close()


def test_durable_app_runs_with_one_commit_per_step(url: str) -> None:
    """durable.App(url) runs a 20-step workflow: 20 step commits plus the run's creation
    and finish, and a second start of the same run id re-runs nothing."""
    app = durable.App(url)
    calls: list[int] = []

    @app.step
    def add(a: int, b: int) -> int:
        calls.append(b)
        return a + b

    @app.workflow
    def total(n: int) -> int:
        t = 0
        for i in range(n):
            t = add(t, i)
        return t

    try:
        assert app.start(total, 20, run_id="r1").result() == 190
        db = app._storage.db  # type: ignore[union-attr]
        c0 = db.commits
        assert app.start(total, 20, run_id="r2").result() == 190
        assert db.commits - c0 == 22
        assert app.start(total, 20, run_id="r2").result() == 190
        assert len(calls) == 40
    finally:
        app.close()

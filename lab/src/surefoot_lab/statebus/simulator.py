"""The tick-based agent simulator behind ``shared.run`` and ``shared.averaged``.

A team of agents adds findings to one shared report. Each task is: read the report, make a
model call (the ``FakeLLM``; it "thinks" for 1–3 ticks), write the report back with the new
finding. The policy decides what happens when two agents overlap:

* ``last_writer_wins``: plain writes; an overlap silently drops the other agent's finding.
* ``optimistic``: the write carries the version read; on ``ConflictError`` the agent re-reads,
  re-thinks (a new model call) and retries, optionally after a random back-off of 1–4 ticks.
* ``locked``: an agent first takes a lease (a row with an expiry and a fencing epoch, never a
  database lock held across the model call); the write is fenced by the lease's epoch.
* ``partitioned``: each agent writes only its own section ``report/<agent>``; a declared,
  deterministic merge builds ``report`` at the end (its cost is reported).

Everything random comes from ``random.Random(seed)``; the store's clock is a ``FakeClock``
that advances one second per tick.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from surefoot.clock import FakeClock
from surefoot.errors import ConfigError, ConflictError
from surefoot.statebus import AgentSession, Lease, Store

__all__ = [
    "POLICIES",
    "MergeCost",
    "RunReport",
    "assign",
    "averaged",
    "merge_sections",
    "run",
]

POLICIES = ("last_writer_wins", "optimistic", "locked", "partitioned", "merged")
REPORT = "report"
MERGED_REPORT = "merged-report"  # a merge key of its own: a Store's merge rules are for good


@dataclass(frozen=True, slots=True)
class MergeCost:
    """What the partitioned policy's merge step cost."""

    sections_read: int
    writes: int
    model_calls: int
    ticks: int
    items: int


@dataclass(frozen=True, slots=True)
class RunReport:
    """One simulated run.

    Attributes:
        produced: tasks the agents set out to add (agents × items).
        kept: distinct findings in the final report. lost: produced − kept.
        retries: writes redone after a conflict (or a lost lease).
        model_calls: calls the FakeLLM received (counted inside the fake).
        ticks: ticks until the last agent finished (plus the merge, if any).
        conflicts: ``ConflictError`` raised by the store.
        lost_updates: versions the store saw overwritten unseen (last-writer-wins).
        waits: ticks agents spent waiting for the lease (``locked``).
        backoff_ticks: ticks spent in random back-off (``optimistic`` with back-off).
        gave_up: tasks abandoned after ``max_retries``.
    """

    policy: str
    agents: int
    seed: int
    produced: int
    kept: int
    lost: int
    retries: int
    model_calls: int
    ticks: int
    conflicts: int
    lost_updates: int
    waits: int = 0
    backoff_ticks: int = 0
    gave_up: int = 0
    merge: MergeCost | None = None
    report: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The counts as a dict (without the report itself)."""
        d = asdict(self)
        d.pop("report")
        return d


def merge_sections(sections: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The declared merge: sections in agent-name order, each section in its own order.

    Deterministic: it never depends on arrival or write order.
    """
    return [item for name in sorted(sections) for item in sections[name]]


@dataclass(slots=True)
class _Agent:
    name: str
    session: AgentSession
    key: str
    task: int = 0
    phase: str = "start"
    ready_at: int = 0
    base: list[dict[str, Any]] = field(default_factory=list)
    version: int = 0
    finding: dict[str, Any] | None = None
    lease: Lease | None = None
    task_retries: int = 0
    done: bool = False


def _check(policy: str, agents: int, items: int, think: tuple[int, int]) -> None:
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    if isinstance(agents, bool) or not isinstance(agents, int) or agents < 1:
        raise ConfigError(f"agents must be an integer >= 1, got {agents!r}")
    if isinstance(items, bool) or not isinstance(items, int) or items < 1:
        raise ConfigError(f"items must be an integer >= 1, got {items!r}")
    lo, hi = think
    if lo < 1 or hi < lo:
        raise ConfigError(f"think must be (low, high) ticks with 1 <= low <= high, got {think!r}")


def run(
    policy: str,
    agents: int = 4,
    seed: int = 0,
    *,
    items: int = 3,
    think: tuple[int, int] = (1, 3),
    backoff: tuple[int, int] | None = None,
    lease_ttl: int = 8,
    slow: float = 0.0,
    max_retries: int = 50,
    merge_with_model: bool = False,
    store: Store | None = None,
    llm: Any = None,
) -> RunReport:
    """Simulate ``agents`` agents each adding ``items`` findings to one shared report.

    Args:
        policy: ``last_writer_wins``, ``optimistic``, ``locked``, ``partitioned`` or
            ``merged`` (each finding is a ``Store.merge`` on an ``append`` key, combined by
            the store, with the finding's id: no conflict, no retry).
        agents: team size. seed: fixes think times, back-offs and the model's text.
        items: findings each agent adds.
        think: the range of ticks a model call takes.
        backoff: ``(1, 4)`` to wait a random number of ticks before an optimistic retry.
        lease_ttl: ticks a ``locked`` lease lasts.
        slow: probability that a model call takes ``lease_ttl + 2`` ticks (so a lease expires
            mid-call and fencing has to refuse the late write).
        max_retries: per task, after which the task is abandoned (counted in ``gave_up``).
        merge_with_model: the partitioned merge also makes one model call (a summary).
        store: a ``Store`` to run on (a fresh ``memory://`` one by default); its clock should
            be a ``FakeClock``, advanced one second per tick.
        llm: the model (a ``FakeLLM(seed=seed)`` by default).

    Returns:
        A ``RunReport``.
    """
    _check(policy, agents, items, think)
    if llm is None:
        from surefoot.llm import FakeLLM

        llm = FakeLLM(seed=seed)
    if store is None:
        clock = FakeClock()
        st = Store("memory://", clock=clock)
    elif isinstance(store.clock, FakeClock):
        st, clock = store, store.clock
    else:
        raise ConfigError(
            f"shared.run needs a Store on a FakeClock (leases are measured in ticks), got "
            f"clock {store.clock!r}; create it with Store(url, clock=FakeClock())"
        )
    if policy == "merged":
        st.declare_merge(MERGED_REPORT, "append")  # declaring it again changes nothing
    rng = random.Random(seed)
    calls0 = llm.calls
    lost0, conflicts0 = st.lost_updates, st.conflicts
    team: list[_Agent] = []
    for i in range(agents):
        name = f"a{i}"
        st.register_agent(name)
        key = f"{REPORT}/{name}" if policy == "partitioned" else REPORT
        if policy == "merged":
            key = MERGED_REPORT
        team.append(_Agent(name, st.session(name), key))
    retries = waits = backoff_ticks = gave_up = 0

    def think_ticks() -> int:
        if slow and rng.random() < slow:
            return lease_ttl + 2
        return rng.randint(*think)

    def begin(a: _Agent, t: int) -> None:
        nonlocal waits
        if policy == "locked" and a.lease is None:
            a.lease = a.session.acquire(REPORT, float(lease_ttl))
            if a.lease is None:
                waits += 1
                a.ready_at = t + 1
                return
        e = a.session.read(a.key)
        a.base = list(e.value) if e is not None else []
        a.version = e.version if e is not None else 0
        prompt = (
            f"You are agent {a.name}. Add finding {a.task} to a report that already has "
            f"{len(a.base)} findings; last: {a.base[-1]['text'] if a.base else 'none'}"
        )
        resp = llm.create(model="fake-1", messages=[{"role": "user", "content": prompt}])
        text = resp.choices[0].message.content
        a.finding = {"agent": a.name, "task": a.task, "text": text[:48]}
        a.phase = "write"
        a.ready_at = t + think_ticks()

    def finish_task(a: _Agent, t: int) -> None:
        a.task += 1
        a.task_retries = 0
        a.phase = "start"
        a.ready_at = t + 1
        if a.task >= items:
            a.done = True

    def retry(a: _Agent, t: int) -> None:
        nonlocal retries, backoff_ticks, gave_up
        retries += 1
        a.task_retries += 1
        a.phase = "start"
        if a.task_retries > max_retries:
            gave_up += 1
            finish_task(a, t)
            return
        if backoff is not None:
            wait = rng.randint(*backoff)
            backoff_ticks += wait
            a.ready_at = t + wait
        else:
            begin(a, t)  # re-read and re-think at once

    def write(a: _Agent, t: int) -> None:
        assert a.finding is not None
        new = [*a.base, a.finding]
        try:
            if policy == "merged":
                a.session.merge(a.key, a.finding, id=f"{a.name}-{a.task}")
            elif policy == "last_writer_wins":
                a.session.write(a.key, new)
            elif policy == "locked":
                assert a.lease is not None
                a.session.write_fenced(a.key, new, a.lease)
            else:  # optimistic, partitioned
                a.session.write(a.key, new, expect=a.version)
        except ConflictError:
            if policy == "locked":
                a.lease = None  # taken over while we thought: take it again, redo the task
            retry(a, t)
            return
        if a.lease is not None:
            st.release(a.lease)
            a.lease = None
        finish_task(a, t)

    t = 0
    finished = 0
    while not all(a.done for a in team):
        order = list(team)
        rng.shuffle(order)
        for a in order:
            if a.done or a.ready_at > t:
                continue
            if a.phase == "start":
                begin(a, t)
            else:
                write(a, t)
            if a.done:
                finished = t
        t += 1
        clock.advance(1.0)
        if t > 100_000:  # pragma: no cover - a bug guard, not a policy outcome
            raise RuntimeError("simulation did not finish in 100,000 ticks")
    ticks = finished + 1
    merge: MergeCost | None = None
    if policy == "partitioned":
        snap = st.snapshot()
        sections = {k.split("/", 1)[1]: e.value for k, e in snap.items() if k.startswith("report/")}
        final = merge_sections(sections)
        merge_calls = 0
        if merge_with_model:
            llm.create(
                model="fake-1",
                messages=[{"role": "user", "content": f"Summarize {len(final)} findings."}],
            )
            merge_calls = 1
        st.write(REPORT, final)
        merge = MergeCost(len(sections), 1, merge_calls, 1, len(final))
        ticks += 1
    else:
        e = st.read(MERGED_REPORT if policy == "merged" else REPORT)
        final = list(e.value) if e is not None else []
    kept = len({(f["agent"], f["task"]) for f in final})
    produced = agents * items
    return RunReport(
        policy=policy,
        agents=agents,
        seed=seed,
        produced=produced,
        kept=kept,
        lost=produced - kept,
        retries=retries,
        model_calls=llm.calls - calls0,
        ticks=ticks,
        conflicts=st.conflicts - conflicts0,
        lost_updates=st.lost_updates - lost0,
        waits=waits,
        backoff_ticks=backoff_ticks,
        gave_up=gave_up,
        merge=merge,
        report=final,
    )


_MEAN_FIELDS = (
    "kept",
    "lost",
    "retries",
    "model_calls",
    "ticks",
    "conflicts",
    "lost_updates",
    "waits",
    "backoff_ticks",
    "gave_up",
)


def averaged(
    policy: str, agents: int = 4, seeds: Iterable[int] = range(20), **kwargs: Any
) -> dict[str, float]:
    """``run`` over several seeds; the mean of each count, plus ``produced`` and ``seeds``.

    Keyword arguments are passed to ``run``.
    """
    seed_list = list(seeds)
    if not seed_list:
        raise ConfigError("seeds must name at least one seed, got an empty list")
    reports = [run(policy, agents, s, **kwargs) for s in seed_list]
    out: dict[str, float] = {
        f: sum(getattr(r, f) for r in reports) / len(reports) for f in _MEAN_FIELDS
    }
    out["produced"] = float(reports[0].produced)
    out["seeds"] = float(len(seed_list))
    return out


def assign(
    policy: str,
    agents: int = 4,
    tasks: int = 8,
    seed: int = 0,
    *,
    think: tuple[int, int] = (1, 3),
    llm: Any = None,
) -> dict[str, int]:
    """Agents claim tasks from a shared pool; each task must be worked on by one agent only.

    This is the case partitioning cannot handle: the invariant ("one agent per task") spans
    every section. Each agent reads the claims, thinks about which task to take (a model
    call of 1–3 ticks), records its claim, then works on the task (another model call).
    Under ``partitioned`` the claim goes to the agent's own section, so two agents that read
    before either wrote claim the same task and both do the work (the merge only finds it
    afterwards). Under ``optimistic`` the claims are one versioned key: the later claim
    raises ``ConflictError`` and that agent re-reads and picks another task.

    Returns:
        ``{"tasks", "claims", "double_claimed", "duplicate_work", "retries", "model_calls"}``.
    """
    if policy not in ("partitioned", "optimistic"):
        raise ConfigError(f"assign supports 'partitioned' and 'optimistic', got {policy!r}")
    if llm is None:
        from surefoot.llm import FakeLLM

        llm = FakeLLM(seed=seed)
    rng = random.Random(seed)
    st = Store("memory://", clock=FakeClock())
    names = [f"a{i}" for i in range(agents)]
    sessions = {n: st.session(st.register_agent(n).name) for n in names}
    # per agent: phase ("pick", "claim", "work"), ready tick, chosen task, version read
    state: dict[str, list[Any]] = {n: ["pick", 0, -1, 0] for n in names}
    retries = 0
    calls0 = llm.calls

    def read_claims(n: str) -> tuple[list[int], int]:
        if policy == "optimistic":
            e = sessions[n].read("claims")
            return (list(e.value) if e else []), (e.version if e else 0)
        snap = sessions[n].snapshot()
        return [c for k, e in snap.items() if k.startswith("claims/") for c in e.value], 0

    def pick(n: str, t: int) -> bool:
        taken, version = read_claims(n)
        free = [i for i in range(tasks) if i not in taken]
        if not free:
            return False
        task = free[0]
        llm.create(model="fake-1", messages=[{"role": "user", "content": f"{n}: take {task}?"}])
        state[n] = ["claim", t + rng.randint(*think), task, version]
        return True

    t = 0
    while True:
        active = False
        order = list(names)
        rng.shuffle(order)
        for n in order:
            phase, ready, task, version = state[n]
            if phase == "done":
                continue
            active = True
            if ready > t:
                continue
            if phase == "pick":
                if not pick(n, t):
                    state[n] = ["done", t, -1, 0]
            elif phase == "claim":
                if policy == "optimistic":
                    e = sessions[n].read("claims")
                    # the claims as read at ``version`` (if they moved on, the write conflicts)
                    base = list(e.value) if e is not None and e.version == version else []
                    try:
                        sessions[n].write("claims", [*base, task], expect=version)
                    except ConflictError:
                        retries += 1
                        if not pick(n, t):
                            state[n] = ["done", t, -1, 0]
                        continue
                else:
                    own = sessions[n].read(f"claims/{n}")
                    sessions[n].write(f"claims/{n}", [*(own.value if own else []), task])
                llm.create(
                    model="fake-1", messages=[{"role": "user", "content": f"{n}: do {task}"}]
                )
                state[n] = ["pick", t + rng.randint(*think), -1, 0]
        if not active:
            break
        t += 1
        if t > 100_000:  # pragma: no cover - a bug guard
            raise RuntimeError("assignment did not finish in 100,000 ticks")
    counts: dict[int, int] = {}
    for k, e in st.snapshot().items():
        if k == "claims" or k.startswith("claims/"):
            for c in e.value:
                counts[c] = counts.get(c, 0) + 1
    return {
        "tasks": tasks,
        "claims": sum(counts.values()),
        "double_claimed": sum(1 for c in counts.values() if c > 1),
        "duplicate_work": sum(c - 1 for c in counts.values()),
        "retries": retries,
        "model_calls": llm.calls - calls0,
    }

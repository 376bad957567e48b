"""Chaos harness: real worker processes, killed with SIGKILL at seeded random moments.

``run_chaos(ChaosConfig(db=…, ledger=…))`` enqueues ``runs`` agent runs per strategy on the
journal URL (any backend: ``sqlite:///…`` or ``postgresql://…``), starts ``workers`` worker
processes, and until every run has ended or ``time_limit`` passes, SIGKILLs one of *its own*
workers (by pid, never by name) every ``kill_every`` seconds and starts it again under the
same worker id. What the fake services received is counted in the ledger file, outside
the workers, so the report's costs and duplicates survive the kills:

* cost per run: model calls, priced tokens and USD per run;
* duplicate effects: posts beyond the first per run and channel;
* completion rate: runs that succeeded within the time limit;
* repeated model calls, and those repeated for a step whose result was already journalled
  (a model call received after the step's journal row was written: the journal failed).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surefoot.durable import STRATEGIES, TERMINAL, App
from surefoot.errors import ConfigError

from ._ledger import Ledger
from ._run import start_agent
from ._services import AgentServices
from ._workflow import build_agent

__all__ = [
    "ChaosConfig",
    "ChaosReport",
    "KillReport",
    "StrategyResult",
    "WorkerProcesses",
    "kill_mid_run",
    "repeated_after_journal",
    "run_chaos",
]


@dataclass(slots=True)
class ChaosConfig:
    """What a chaos run does.

    Args:
        db: the journal URL the workers share.
        ledger: the ledger file the fake services record into.
        runs: agent runs per strategy.
        strategies: the recovery strategies compared (runs are interleaved).
        workers: worker processes.
        concurrency: runs each worker executes at once.
        seed: seeds the kill schedule (which worker, when) and the FakeLLM.
        kill_every: (low, high) seconds between kills, drawn uniformly.
        max_kills: at most this many SIGKILLs.
        kill_in_flight_first: the first kill comes as soon as one of the workers holds a
            run (status ``running``), whatever ``kill_every`` says, and hits that worker;
            later kills follow ``kill_every``. A short run (tests, ``--quick``) whose runs
            all end before the first scheduled kill then still sees one.
        time_limit: seconds for the whole run; runs not ended by then count as incomplete.
        lease: the workers' lease in seconds.
        latency / reply_latency: the fake services' delays (seconds).
        worker_cmd: ``f(worker_id) -> argv`` to start a worker another way (e.g.
            ``surefoot worker --app surefoot_lab.agent.app:app``); the ledger and
            latencies are passed in ``SUREFOOT_AGENT_*`` environment variables too.
        logdir: where worker output goes (default: next to the ledger).
    """

    db: str
    ledger: str
    runs: int = 200
    strategies: tuple[str, ...] = STRATEGIES
    workers: int = 2
    concurrency: int = 16
    seed: int = 0
    kill_every: tuple[float, float] = (0.3, 1.0)
    max_kills: int = 40
    kill_in_flight_first: bool = False
    time_limit: float = 60.0
    lease: float = 2.0
    latency: float = 0.005
    reply_latency: float = 0.01
    worker_cmd: Callable[[str], list[str]] | None = None
    logdir: str | None = None

    def check(self) -> None:
        """Raises ConfigError on a nonsensical setting."""
        bad = [s for s in self.strategies if s not in STRATEGIES]
        if bad:
            raise ConfigError(f"unknown strategies {bad}; use {', '.join(STRATEGIES)}")
        if self.runs < 1 or self.workers < 1 or self.concurrency < 1:
            raise ConfigError(
                f"runs, workers and concurrency must be >= 1, got {self.runs}, "
                f"{self.workers}, {self.concurrency}"
            )
        lo, hi = self.kill_every
        if not 0 < lo <= hi:
            raise ConfigError(f"kill_every must be (low, high) with 0 < low <= high, got {lo, hi}")
        if self.time_limit <= 0 or self.max_kills < 0:
            raise ConfigError("time_limit must be > 0 and max_kills >= 0")


@dataclass(frozen=True, slots=True)
class StrategyResult:
    """One strategy's outcome under chaos (see the module docstring for each figure)."""

    strategy: str
    runs: int
    completed: int
    statuses: dict[str, int]
    model_calls_per_run: float
    tokens_per_run: float
    cost_per_run: float
    duplicate_effects: int
    runs_with_duplicates: int
    repeated_model_calls: int
    repeated_after_journal: int | None

    @property
    def completion_rate(self) -> float:
        return self.completed / self.runs if self.runs else 0.0


@dataclass(slots=True)
class ChaosReport:
    """The whole chaos run: per-strategy results, kills, restarts and time taken."""

    results: list[StrategyResult]
    kills: int
    restarts: int
    elapsed: float
    timed_out: bool
    params: dict[str, Any] = field(default_factory=dict)

    def by_strategy(self) -> dict[str, StrategyResult]:
        return {r.strategy: r for r in self.results}


class WorkerProcesses:
    """Agent worker processes started by this harness; it signals only these pids.

    Args:
        cfg: the journal URL, ledger, lease, latencies and worker command.
        logdir: where each worker's output goes (``<worker id>.log``).
    """

    def __init__(self, cfg: ChaosConfig, logdir: Path) -> None:
        self.cfg = cfg
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0
        env = dict(os.environ)
        env.update(
            SUREFOOT_AGENT_LEDGER=cfg.ledger,
            SUREFOOT_AGENT_SEED=str(cfg.seed),
            SUREFOOT_AGENT_LATENCY=str(cfg.latency),
            SUREFOOT_AGENT_REPLY_LATENCY=str(cfg.reply_latency),
            SUREFOOT_DB=cfg.db,
        )
        env.pop("SUREFOOT_CRASH", None)
        self.env = env

    def argv(self, wid: str) -> list[str]:
        c = self.cfg
        if c.worker_cmd is not None:
            return c.worker_cmd(wid)
        return [
            sys.executable,
            "-m",
            "surefoot_lab.agent.worker",
            "--db",
            c.db,
            "--ledger",
            c.ledger,
            "--worker-id",
            wid,
            "--concurrency",
            str(c.concurrency),
            "--lease",
            str(c.lease),
            "--seed",
            str(c.seed),
            "--latency",
            str(c.latency),
            "--reply-latency",
            str(c.reply_latency),
        ]

    def start(self, wid: str) -> None:
        """Start a worker process with id ``wid`` (again, after a kill)."""
        log = open(self.logdir / f"{wid}.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.procs[wid] = subprocess.Popen(
                self.argv(wid), env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        finally:
            log.close()
        self.started += 1

    def kill(self, wid: str) -> None:
        """SIGKILL worker ``wid`` (a pid this harness started) and reap it."""
        p = self.procs[wid]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)

    def stop_all(self) -> None:
        """SIGTERM every worker started here; SIGKILL those still alive after 10 s."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def repeated_after_journal(app: App, ledger: Ledger, run_ids: list[str]) -> int:
    """Model calls received after their step's result was journalled (should be 0).

    A call received *before* the step's journal row was written may legitimately happen
    again after a crash (the journal never saw its result); one received *after* it means
    a journalled step was recomputed.
    """
    n = 0
    for rid in run_ids:
        done = {
            s.name: s.finished_at
            for s in app.show(rid).steps
            if s.status == "done" and s.finished_at is not None
        }
        for c in ledger.calls(run=rid, service="model"):
            fin = done.get(c["step"])
            if fin is not None and c["at"] > fin:
                n += 1
    return n


def run_chaos(
    cfg: ChaosConfig, *, progress: Callable[[int, int], None] | None = None
) -> ChaosReport:
    """Run the agent under SIGKILL chaos and measure it; see :class:`ChaosConfig`.

    Raises:
        ConfigError: a bad setting.
    """
    cfg.check()
    rng = random.Random(cfg.seed)
    logdir = Path(cfg.logdir or Path(cfg.ledger).parent)
    logdir.mkdir(parents=True, exist_ok=True)
    app = App(cfg.db, lease=cfg.lease, worker_id=f"chaos-harness-{os.getpid()}")
    ledger = Ledger(cfg.ledger)
    services = AgentServices(ledger, seed=cfg.seed)
    wf = build_agent(app, services)["1"]
    ids: dict[str, list[str]] = {s: [] for s in cfg.strategies}
    for i in range(cfg.runs):
        for s in cfg.strategies:
            rid = f"chaos-{cfg.seed}-{s}-{i}"
            start_agent(app, wf, f"question {i}", run_id=rid, enqueue=True, strategy=s)
            ids[s].append(rid)
    everyone = [r for rs in ids.values() for r in rs]
    total = len(everyone)
    workers = WorkerProcesses(cfg, logdir)
    wids = [f"chaos-w{k}" for k in range(cfg.workers)]
    t0 = time.monotonic()
    kills = 0
    ended = 0
    timed_out = False
    try:
        for w in wids:
            workers.start(w)
        next_kill = t0 + rng.uniform(*cfg.kill_every)
        hunting = cfg.kill_in_flight_first and cfg.max_kills > 0
        while True:
            holder = _holder(app, wids) if hunting else None
            ended = _ended(app, everyone)
            if progress is not None:
                progress(ended, total)
            if ended >= total:
                break
            now = time.monotonic()
            if now - t0 >= cfg.time_limit:
                timed_out = True
                break
            if hunting:
                if holder is not None:  # a run is in flight on ``holder``: kill it now
                    hunting = False
                    workers.kill(holder)
                    kills += 1
                    workers.start(holder)
                    next_kill = now + rng.uniform(*cfg.kill_every)
                time.sleep(0.005)
                continue
            if kills < cfg.max_kills and now >= next_kill:
                victim = rng.choice(wids)
                workers.kill(victim)
                kills += 1
                workers.start(victim)
                next_kill = now + rng.uniform(*cfg.kill_every)
            time.sleep(0.05)
    finally:
        workers.stop_all()
    elapsed = time.monotonic() - t0
    results = [_result(app, ledger, s, ids[s]) for s in cfg.strategies]
    app.close()
    ledger.close()
    return ChaosReport(
        results=results,
        kills=kills,
        restarts=workers.started - cfg.workers,
        elapsed=elapsed,
        timed_out=timed_out,
        params={
            "runs_per_strategy": cfg.runs,
            "workers": cfg.workers,
            "concurrency": cfg.concurrency,
            "seed": cfg.seed,
            "kill_every": list(cfg.kill_every),
            "max_kills": cfg.max_kills,
            "kill_in_flight_first": cfg.kill_in_flight_first,
            "time_limit": cfg.time_limit,
            "lease": cfg.lease,
            "latency": cfg.latency,
            "reply_latency": cfg.reply_latency,
        },
    )


def _holder(app: App, wids: list[str]) -> str | None:
    """The id of one of ``wids`` that holds a running run now, or None."""
    for r in app.list_runs(status="running", limit=1_000):
        if r.owner in wids:
            return r.owner
    return None


def _ended(app: App, run_ids: list[str]) -> int:
    want = set(run_ids)
    n = 0
    for status in (*sorted(TERMINAL), "needs_attention"):
        n += sum(1 for r in app.list_runs(status=status, limit=1_000_000) if r.run_id in want)
    return n


def _result(app: App, ledger: Ledger, strategy: str, run_ids: list[str]) -> StrategyResult:
    statuses: dict[str, int] = {}
    for rid in run_ids:
        st = app.show(rid).run.status
        statuses[st] = statuses.get(st, 0) + 1
    t = ledger.totals(run_ids)
    n = len(run_ids)
    dup_runs = 0
    for rid in run_ids:
        posts = ledger.posts(rid)
        dup_runs += len(posts) > len({p["channel"] for p in posts})
    return StrategyResult(
        strategy=strategy,
        runs=n,
        completed=statuses.get("succeeded", 0),
        statuses=statuses,
        model_calls_per_run=t.model_calls / n,
        tokens_per_run=t.tokens / n,
        cost_per_run=t.cost / n,
        duplicate_effects=t.duplicate_posts,
        runs_with_duplicates=dup_runs,
        repeated_model_calls=t.repeated_model_calls,
        repeated_after_journal=(
            None if strategy == "restart" else repeated_after_journal(app, ledger, run_ids)
        ),
    )


@dataclass(frozen=True, slots=True)
class KillReport:
    """One agent run whose worker was SIGKILLed mid-run and restarted.

    Attributes:
        strategy: the run's strategy. status: how the run ended.
        journalled_before_kill: steps whose results were journalled when the kill came.
        calls_per_step: requests the services received per step (``publish``: publish
            requests), counted in the ledger.
        model_calls: model calls received for the run.
        repeated_after_journal: model calls received after their step was journalled.
        next_step_s: seconds from restarting the worker to the next journalled step (None
            under ``restart``, which journals no steps).
    """

    strategy: str
    status: str
    journalled_before_kill: list[str]
    calls_per_step: dict[str, int]
    model_calls: int
    repeated_after_journal: int
    next_step_s: float | None


def _until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def kill_mid_run(
    cfg: ChaosConfig,
    *,
    strategy: str = "journal_keys",
    after: tuple[str, ...] = ("plan", "search"),
    run_id: str = "k9",
    timeout: float = 60.0,
) -> KillReport:
    """Run one agent run in one worker process; SIGKILL it once ``after`` are done, restart it.

    The kill comes half a service latency (``cfg.latency``) after the steps in ``after``
    were journalled (under ``restart``, received by the services), so the next step is in
    flight. The worker is restarted under the same id.

    Raises:
        ConfigError: a bad setting.
    """
    cfg.check()
    app = App(cfg.db, lease=cfg.lease, worker_id=f"kill9-harness-{os.getpid()}")
    ledger = Ledger(cfg.ledger)
    wf = build_agent(app, AgentServices(ledger))["1"]
    start_agent(app, wf, "why is the sky blue?", run_id=run_id, enqueue=True, strategy=strategy)
    workers = WorkerProcesses(cfg, Path(cfg.logdir or Path(cfg.ledger).parent))
    marks = set(after)

    def seen() -> set[str]:
        if strategy == "restart":  # nothing is journalled: watch what the services received
            return {c["step"] for c in ledger.calls(run_id)}
        return {s.name for s in app.show(run_id).steps if s.status == "done"}

    def status() -> str:
        return app.show(run_id).run.status

    next_step: float | None = None
    try:
        workers.start("w1")
        _until(lambda: marks <= seen(), timeout)
        time.sleep(cfg.latency / 2)  # mid-way through the next step
        journalled = [s.name for s in app.show(run_id).steps if s.status == "done"]
        workers.kill("w1")
        restarted = time.monotonic()
        workers.start("w1")
        if strategy != "restart":
            n = len(journalled)
            _until(lambda: len(app.show(run_id).steps) > n or status() == "succeeded", timeout)
            next_step = time.monotonic() - restarted
        _until(lambda: status() in (*TERMINAL, "needs_attention"), timeout)
    finally:
        workers.stop_all()
    calls = ledger.calls(run_id)
    per_step = {
        s: sum(1 for c in calls if (c["service"] == s if s == "publish" else c["step"] == s))
        for s in ("plan", "search", "read", "summarize", "draft", "publish")
    }
    report = KillReport(
        strategy=strategy,
        status=status(),
        journalled_before_kill=journalled,
        calls_per_step=per_step,
        model_calls=sum(1 for c in calls if c["service"] == "model"),
        repeated_after_journal=repeated_after_journal(app, ledger, [run_id]),
        next_step_s=next_step,
    )
    app.close()
    ledger.close()
    return report

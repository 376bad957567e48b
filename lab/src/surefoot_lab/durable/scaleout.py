"""Scale-out experiments: the chaos test on a real PostgreSQL server.

``durable.chaos-postgres`` runs the 7-step agent with ``journal_keys`` in several real
worker processes that share one PostgreSQL schema, SIGKILLs them at seeded random moments
(the harness of ``durable.chaos``), and, only when asked (``restart=True``; ``surefoot lab
chaos --restart-server``; ``SUREFOOT_LAB_RESTART_SERVER=1`` for the lab), restarts the local
PostgreSQL server itself once mid-run (``pg_ctlcluster … restart``, bounded by a timeout). It
then checks every run: status, the journal (each of the seven steps done exactly once, in
order), the audit log (created … succeeded) and the ledger outside the workers (one post per
channel, no model call repeated after its step was journalled).

``surefoot lab chaos --db postgresql://… --workers 3 --runs 300`` runs the same thing.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from surefoot import storage
from surefoot.durable import App
from surefoot.errors import ConfigError, StoreUnavailableError

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ..agent import APPROVE, STEPS, Ledger
from ..agent.chaos import ChaosConfig, ChaosReport, run_chaos

__all__ = ["PostgresChaos", "chaos_run", "find_restart_command", "run_consistency"]

SEED_FILE = "002_91829255f3db9460.txt"
RESTART_ENV = "SUREFOOT_LAB_RESTART_SERVER"  # "1": durable.chaos-postgres restarts the server
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def find_restart_command(url: str) -> list[str] | None:
    """The ``pg_ctlcluster`` command that restarts the local cluster serving ``url``.

    Returns None when the server is not on this machine or no Debian cluster listens on
    the URL's port (then the chaos run does not restart the server, and says so).
    """
    parts = urlsplit(url)
    if (parts.hostname or "localhost") not in ("localhost", "127.0.0.1", "::1"):
        return None
    port = str(parts.port or 5432)
    try:
        out = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[2] == port and cols[3] == "online":
            return ["pg_ctlcluster", "--skip-systemctl-redirect", cols[0], cols[1], "restart"]
    return None


@dataclass(slots=True)
class PostgresChaos:
    """The outcome of a chaos run on PostgreSQL.

    Attributes:
        report: the harness's report (kills, per-strategy costs and duplicates).
        restart: what happened to the server restart (``not requested``, ``restarted in
            1.2 s``, ``restart failed …``, ``not reached``…).
        restart_at_ended: runs ended when the restart began (None: no restart).
        restart_requested: the caller asked for a restart. restarted: it was done.
        inconsistent: run ids whose journal, audit log or ledger disagree with success.
        problems: the first few inconsistencies, described.
    """

    report: ChaosReport
    restart: str
    restart_at_ended: int | None
    inconsistent: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    restart_requested: bool = False
    restarted: bool = False

    @property
    def restart_failed(self) -> bool:
        """A restart was asked for and did not happen (failed, timed out or not reached)."""
        return self.restart_requested and not self.restarted


_WORKERS_OWN = ("signal", "claimed", "taken_over")


def run_consistency(app: App, ledger: Ledger, run_ids: list[str]) -> tuple[list[str], list[str]]:
    """Check each run's final state, journal, audit log and ledger; (bad ids, problems)."""
    bad: list[str] = []
    problems: list[str] = []
    for rid in run_ids:
        detail = app.show(rid)
        issues = []
        if detail.run.status != "succeeded":
            issues.append(f"status {detail.run.status}")
        done = [s.name for s in detail.steps if s.status == "done"]
        want = [name if name != APPROVE else f"signal:{name}" for name in STEPS]
        if done != want or len(detail.steps) != len(STEPS):
            issues.append(f"journal {[(s.name, s.status) for s in detail.steps]}")
        # its approval, and the workers' own claims and takeovers (kills are the point here)
        actions = [a.action for a in detail.audit if a.action not in _WORKERS_OWN]
        if actions != ["created"]:  # a clean run: created, nothing undone, no operator
            issues.append(f"audit {actions}")
        posts = ledger.posts(rid)
        channels = [p["channel"] for p in posts]
        result = detail.run.result if isinstance(detail.run.result, dict) else {}
        if not posts or len(channels) != len(set(channels)):
            issues.append(f"posts {channels}")
        elif result.get("status") != "published" or len(result.get("posts", [])) != len(posts):
            issues.append(f"result {result} vs {len(posts)} post(s) received")
        if any(p.get("removed_at") for p in posts):
            issues.append("a post was taken down")
        if issues:
            bad.append(rid)
            if len(problems) < 5:
                problems.append(f"{rid}: {'; '.join(issues)}")
    return bad, problems


def chaos_run(
    url: str,
    *,
    workers: int = 3,
    runs: int = 300,
    seed: int = 0,
    restart: bool = False,
    restart_after: float = 0.2,
    restart_timeout: float = 60.0,
    time_limit: float = 240.0,
    kill_every: tuple[float, float] = (0.5, 1.5),
    max_kills: int = 30,
    latency: float = 0.01,
    kill_in_flight_first: bool = False,
    workdir: str,
    progress: Any = None,
) -> PostgresChaos:
    """Run the agent under SIGKILL chaos (and one server restart) on ``url``.

    Args:
        url: a ``postgresql://`` URL (the run uses a fresh schema in it, dropped afterwards)
            or a ``sqlite:///`` file (no server to restart).
        workers / runs / seed / kill_every / max_kills / time_limit: as ``ChaosConfig``.
        latency: the fake services' request and reply latency (runs stay in flight longer).
        kill_in_flight_first: the first kill hits a worker as soon as it holds a run (see
            ``ChaosConfig``), so even a short run sees one.
        restart: restart the PostgreSQL server once (opt-in: it cuts every client of that
            server). It must be a local ``pg_ctlcluster`` cluster; a failed restart is
            reported in ``restart_failed``.
        restart_after: restart once this fraction of the runs has ended.
        restart_timeout: the restart command is killed after this many seconds.
        workdir: where the ledger and worker logs go.
        progress: called with (ended, total).

    Raises:
        ConfigError: not a journal URL, bad sizes, or ``restart`` without a local
            PostgreSQL cluster on the URL's port to restart.
        StoreUnavailableError: the server cannot be reached.
    """
    parsed = storage.parse_url(url)
    if parsed.scheme not in ("postgresql", "sqlite"):
        raise ConfigError(
            f"the chaos run needs a journal URL (postgresql://… or sqlite:///…), got "
            f"{storage.redact(url)!r}; Redis does not offer the journal"
        )
    if runs < 1 or workers < 1:
        raise ConfigError(f"runs and workers must be >= 1, got runs={runs}, workers={workers}")
    pg = parsed.scheme == "postgresql"
    if pg and "schema" in parsed.options:
        raise ConfigError(
            "leave ?schema= out of the chaos URL: the run creates its own schema and drops it"
        )
    sep = "&" if "?" in url else "?"
    db = f"{url}{sep}schema=sf_chaos_{uuid.uuid4().hex[:10]}" if pg else url
    cmd = find_restart_command(url) if restart and pg else None
    if restart and cmd is None:  # asked for, impossible: say so before a run of minutes
        raise ConfigError(
            f"a server restart was asked for, but {storage.redact(url)!r} "
            + (
                "is not served by an online local pg_ctlcluster cluster on its port"
                if pg
                else "is a SQLite file (there is no server to restart)"
            )
            + "; drop the restart option (--restart-server) or point --db at a local cluster"
        )
    state: dict[str, Any] = {
        "restart": "not requested" if cmd is None else "not reached",
        "at": None,
        "ok": False,
    }
    lock = threading.Lock()

    def do_restart(ended: int, cmd: list[str]) -> None:
        state["at"] = ended
        t0 = time.monotonic()
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=restart_timeout)
            took = time.monotonic() - t0
            ok = res.returncode == 0
            state["ok"] = ok
            state["restart"] = (
                f"restarted in {took:.1f} s ({' '.join(cmd)})"
                if ok
                else f"restart failed ({res.returncode}): {res.stderr.strip()[:200]}"
            )
        except subprocess.TimeoutExpired:
            state["restart"] = f"restart timed out after {restart_timeout:g} s"
        except OSError as exc:
            state["restart"] = f"restart failed: {exc}"

    def watch(ended: int, total: int) -> None:
        if progress is not None:
            progress(ended, total)
        if cmd is None:
            return
        with lock:
            if state["at"] is None and ended >= restart_after * total:
                state["at"] = ended
                worker = threading.Thread(target=do_restart, args=(ended, cmd), daemon=True)
                state["thread"] = worker
                worker.start()

    ledger = os.path.join(workdir, f"chaos-ledger-{uuid.uuid4().hex[:6]}.db")
    cfg = ChaosConfig(
        db=db,
        ledger=ledger,
        runs=runs,
        strategies=("journal_keys",),
        workers=workers,
        concurrency=16,
        seed=seed,
        kill_every=kill_every,
        max_kills=max_kills,
        kill_in_flight_first=kill_in_flight_first,
        time_limit=time_limit,
        lease=2.0,
        latency=latency,
        reply_latency=latency,
        logdir=workdir,
    )
    try:
        report = run_chaos(cfg, progress=watch)
        restarting = state.get("thread")
        if restarting is not None:  # bounded: the command itself times out
            restarting.join(restart_timeout + 5)
        app = App(db, worker_id="chaos-check")
        book = Ledger(ledger)
        ids = [f"chaos-{seed}-journal_keys-{i}" for i in range(runs)]
        bad, problems = run_consistency(app, book, ids)
        app.close()
        book.close()
    finally:
        if pg:
            _drop(db)
    return PostgresChaos(
        report, state["restart"], state["at"], bad, problems, cmd is not None, state["ok"]
    )


def _drop(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            st: Any = storage.open(url)
            st.db.drop_schema()
            st.close()
            return
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _reachable(url: str) -> str | None:
    try:
        sep = "&" if "?" in url else "?"
        st: Any = storage.open(f"{url}{sep}connect_timeout=3&reconnect_timeout=0")
        st.close()
    except StoreUnavailableError as exc:
        return str(exc)
    return None


@experiment(
    id="durable.chaos-postgres",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="The chaos test on PostgreSQL: 3 workers SIGKILLed (and the server restarted, opt-in)",
)
def chaos_postgres(ctx: LabContext) -> LabResult:
    # The main job (`surefoot lab run all`) runs on embedded SQLite: this experiment uses a
    # server only when the user names one with --db postgresql://…, and restarts it only
    # when SUREFOOT_LAB_RESTART_SERVER=1 says so (it cuts every client of that server).
    url = ctx.db if ctx.db and ctx.db.startswith("postgres") else None
    if url is None:
        return LabResult(
            facts={"skipped": "no PostgreSQL URL given"},
            answer=(
                "Skipped: this experiment needs a PostgreSQL server. Run `surefoot lab run "
                f"durable.chaos-postgres --db {DEFAULT_PG}` (and SUREFOOT_LAB_RESTART_SERVER=1 "
                "to restart that server once mid-run)."
            ),
            model=NO_MODEL,
        )
    why = _reachable(url)
    if why is not None:
        return LabResult(
            facts={"skipped": why},
            answer=f"Skipped: {why} Set SUREFOOT_PG_URL or pass --db postgresql://….",
            params={"db": storage.redact(url)},
            model=NO_MODEL,
        )
    quick = ctx.quick
    out = chaos_run(
        url,
        workers=2 if quick else 3,
        runs=12 if quick else 300,
        seed=ctx.seed,
        restart=os.environ.get(RESTART_ENV, "") == "1",
        time_limit=60.0 if quick else 240.0,
        kill_every=(0.3, 0.8) if quick else (0.5, 1.5),
        max_kills=4 if quick else 30,
        # quick: the 12 runs may all end before a scheduled kill; kill one in flight first
        kill_in_flight_first=quick,
        latency=0.03 if quick else 0.01,
        workdir=str(ctx.workdir),
        progress=ctx.progress,
    )
    rep = out.report
    (r,) = rep.results
    t = Table(
        f"{r.runs} agent runs (journal_keys), {rep.params['workers']} workers on one PostgreSQL "
        f"schema, {rep.kills} SIGKILLs in {rep.elapsed:.1f} s"
        f"{' (time limit hit)' if rep.timed_out else ''}; server: {out.restart}",
        [
            "completed",
            "completion rate",
            "duplicate posts",
            "repeated model calls",
            "repeated after journalled",
            "model calls/run",
            "USD/run",
            "inconsistent runs",
        ],
    )
    t.add(
        f"{r.completed}/{r.runs}",
        f"{r.completion_rate:.0%}",
        r.duplicate_effects,
        r.repeated_model_calls,
        r.repeated_after_journal,
        round(r.model_calls_per_run, 3),
        round(r.cost_per_run, 6),
        len(out.inconsistent),
    )
    if out.problems:
        t.note = "first problems: " + " | ".join(out.problems)
    return LabResult(
        tables=[t],
        facts={
            "runs": r.runs,
            "completed": r.completed,
            "completion_rate": r.completion_rate,
            "duplicate_effects": r.duplicate_effects,
            "repeated_after_journal": r.repeated_after_journal,
            "repeated_model_calls": r.repeated_model_calls,
            "inconsistent_runs": len(out.inconsistent),
            "kills": rep.kills,
            "restart": out.restart,
            "restart_requested": out.restart_requested,
            "restart_failed": out.restart_failed,
            "timed_out": rep.timed_out,
        },
        answer=chaos_answer(out),
        params={**rep.params, "db": storage.redact(url), "restart": out.restart},
    )


def chaos_answer(out: PostgresChaos) -> str:
    """The answer of ``durable.chaos-postgres``, every clause from ``out``."""
    rep = out.report
    (r,) = rep.results
    ok = (
        r.completed == r.runs
        and r.duplicate_effects == 0
        and not r.repeated_after_journal
        and not out.inconsistent
        and not out.restart_failed
    )
    failed_restart = (
        f" The requested server restart did not happen: {out.restart}."
        if out.restart_failed
        else ""
    )
    return (
        f"{'Passed' if ok else 'FAILED'}: {r.completed} of {r.runs} runs succeeded "
        f"({r.completion_rate:.0%}) with {rep.kills} SIGKILLs of workers and "
        f"{rep.restarts} worker restarts (server restart: {out.restart.split(' (')[0]}); "
        f"{r.duplicate_effects} duplicate posts, {r.repeated_after_journal} model calls "
        f"repeated for journalled steps ({r.repeated_model_calls} repeated for steps in "
        f"flight at a kill), and {len(out.inconsistent)} runs whose journal, audit log or "
        f"effects disagree.{failed_restart}"
    )

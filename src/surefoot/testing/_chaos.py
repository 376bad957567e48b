"""Chaos against a team's own app: real workers SIGKILLed at random, every run checked.

``run_chaos("myapp.flows:app", "triage", db="sqlite:///chaos.db", runs=20)`` enqueues the
runs, starts ``workers`` processes of ``surefoot worker`` on the journal (JSON log lines on
their stderr, one file per process), SIGKILLs a random one at seeded random moments and
starts a new one in its place, until every run has ended or ``time_limit`` passes. Then it
checks, from the journal and the workers' own log lines:

- every run ended ``succeeded`` (any other end, or no end, is listed);
- no step completed twice: each ``step_done`` line (logged only after the step's journal
  write was accepted) names a run and a position, and none appears twice;
- a run claimed more than once has a ``taken_over`` (or resume) entry in its audit log, so
  the page and ``surefoot runs show`` tell the story;
- at least one SIGKILL hit a worker while it held a run (else nothing was tested).

It starts and kills only its own processes, by pid, and stops them all before it returns.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["ChaosReport", "run_chaos"]

HANDOVER_ACTIONS = ("taken_over", "resumed", "resume", "retried")


@dataclass
class ChaosReport:
    """What a chaos run did and found. ``ok`` is True when every check passed."""

    runs: int
    workers: int
    seed: int
    kills: int = 0
    kills_holding_a_run: int = 0
    elapsed: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    claimed_more_than_once: int = 0
    steps_journalled: int = 0
    steps_done_logged: int = 0
    repeated_steps: list[tuple[str, str, int]] = field(default_factory=list)
    unexplained_handovers: list[str] = field(default_factory=list)
    not_succeeded: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return self.statuses.get("succeeded", 0)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runs": self.runs,
            "workers": self.workers,
            "seed": self.seed,
            "kills": self.kills,
            "kills_holding_a_run": self.kills_holding_a_run,
            "elapsed_s": round(self.elapsed, 2),
            "statuses": self.statuses,
            "claimed_more_than_once": self.claimed_more_than_once,
            "steps_journalled": self.steps_journalled,
            "steps_done_logged": self.steps_done_logged,
            "repeated_steps": [list(r) for r in self.repeated_steps],
            "unexplained_handovers": self.unexplained_handovers,
            "not_succeeded": [list(r) for r in self.not_succeeded],
            "problems": self.problems,
        }


class _Worker:
    """One worker process of the chaos run, its log file and what the log says it holds."""

    def __init__(self, cmd: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._log, env=env)
        self._read = 0
        self.holding: set[str] = set()

    def refresh(self) -> None:
        """Follow the log: which runs this worker claimed and has not let go of."""
        with self.log_path.open("rb") as f:
            f.seek(self._read)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self._read += end
        for line in chunk[:end].splitlines():
            event = _event(line)
            if event is None:
                continue
            run = str(event.get("run_id", ""))
            if event.get("event") in ("claimed", "taken_over", "resumed"):
                self.holding.add(run)
            elif event.get("event") in ("finished", "waiting", "fenced", "needs_attention"):
                self.holding.discard(run)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()

    def stop(self, grace: float = 5.0) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "event" in value else None


def _arguments(value: Any) -> tuple[list[Any], dict[str, Any]]:
    """A run's input: a JSON list is its positional arguments, an object its keyword
    arguments, anything else its one argument."""
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict):
        return [], value
    return [value], {}


def _check_inputs(fn: Any, workflow: str, inputs: list[Any] | None) -> None:
    """Refuses, before any run is enqueued, an input ``workflow`` cannot be called with
    (such runs can only fail, and the report would say no more than "failed")."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return
    for i, value in enumerate(inputs if inputs is not None else [[]]):
        args, kwargs = _arguments(value)
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            given = "no arguments (pass --input or --inputs)" if inputs is None else repr(value)
            where = "" if inputs is None else f" (input {i + 1})"
            raise ConfigError(
                f"{workflow}{signature} cannot take {given}{where}: {exc}; a JSON list is "
                "its positional arguments, an object its keyword arguments. Nothing was run"
            ) from None


def run_chaos(
    app_ref: str,
    workflow: str,
    *,
    db: str,
    runs: int = 20,
    inputs: list[Any] | None = None,
    workers: int = 3,
    seed: int = 0,
    max_kills: int = 10,
    kill_every: tuple[float, float] = (0.3, 1.5),
    lease: float = 2.0,
    time_limit: float = 120.0,
    workdir: str | Path | None = None,
    python: str = sys.executable,
) -> ChaosReport:
    """Run ``runs`` runs of ``workflow`` under SIGKILLs and check them; see the module doc.

    ``inputs``: one JSON value per run (a list: positional arguments, an object: keyword
    arguments); without it every run gets no arguments, with it ``runs`` is its length.
    ``kill_every``: the range, in seconds, of the seeded random wait between two kills.
    ``lease``: the workers' lease, so a killed worker's runs are taken over within it (a
    worker that sees the holder's process is gone takes them over at once).
    """
    from .. import durable

    if inputs is not None:
        runs = len(inputs)
    if runs < 1:
        raise ConfigError(f"runs must be at least 1, got {runs}")
    if workers < 1:
        raise ConfigError(f"workers must be at least 1, got {workers}")
    if max_kills < 0:
        raise ConfigError(f"max_kills must be 0 or more, got {max_kills}")
    low, high = kill_every
    if not 0 < low <= high:
        raise ConfigError(f"kill_every must be (low, high) with 0 < low <= high, got {kill_every}")
    app = durable.load_app(app_ref)
    app.configure(url=db)
    names = {name for name, _version in app.registered()}
    if workflow not in names:
        known = ", ".join(sorted(names)) or "none"
        raise ConfigError(
            f"{app_ref} has no workflow {workflow!r} (it has: {known}); pass --workflow NAME"
        )
    _check_inputs(app.registry.resolve(workflow).fn, workflow, inputs)
    rng = random.Random(seed)
    report = ChaosReport(runs=runs, workers=workers, seed=seed)
    tag = f"chaos-{os.getpid()}-{seed}"
    run_ids = [f"{tag}-{i}" for i in range(runs)]
    for i, run_id in enumerate(run_ids):
        args, kwargs = _arguments(inputs[i] if inputs is not None else [])
        app.enqueue(workflow, *args, run_id=run_id, **kwargs)
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="chaos-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    fleet: list[_Worker] = []
    incarnation = 0

    def spawn(slot: int) -> _Worker:
        nonlocal incarnation
        incarnation += 1
        cmd = [
            python, "-m", "surefoot", "--log-format", "json", "--log-level", "info",
            "worker", "--app", app_ref, "--lease", str(lease),
            "--poll", "0.05", "--worker-id", f"{tag}-w{slot}-{incarnation}",
        ]  # fmt: skip
        # the journal URL goes by environment: a password in it stays off the command line
        env = {**os.environ, "SUREFOOT_DB": db}
        return _Worker(cmd, folder / f"worker-{slot}-{incarnation}.log", env)

    try:
        fleet = [spawn(slot) for slot in range(workers)]
        next_kill = time.monotonic() + rng.uniform(low, high)
        while time.monotonic() - started < time_limit:
            if _all_ended(app, run_ids):
                break
            for slot, w in enumerate(fleet):
                w.refresh()
                if not w.alive():  # died by itself: say so, and keep the fleet's size
                    report.problems.append(
                        f"worker {w.log_path.name} exited by itself (rc {w.proc.returncode}); "
                        f"its log: {w.log_path}"
                    )
                    fleet[slot] = spawn(slot)
            if report.kills < max_kills and time.monotonic() >= next_kill:
                holding = [i for i, w in enumerate(fleet) if w.holding]
                if report.kills == 0 and not holding:
                    time.sleep(0.02)  # the first kill waits for a worker that holds a run
                    continue
                slot = rng.choice(holding or list(range(len(fleet))))
                report.kills_holding_a_run += bool(fleet[slot].holding)
                fleet[slot].kill()
                report.kills += 1
                fleet[slot] = spawn(slot)
                next_kill = time.monotonic() + rng.uniform(low, high)
            time.sleep(0.05)
    finally:
        for w in fleet:
            w.stop()
    report.elapsed = time.monotonic() - started
    _check(app, run_ids, sorted(folder.glob("worker-*.log")), report, max_kills)
    app.close()
    return report


def _all_ended(app: Any, run_ids: list[str]) -> bool:
    ended = ("succeeded", "failed", "cancelled", "needs_attention")
    return all(app.handle(run_id).status() in ended for run_id in run_ids)


def steps_done(logs: list[Path], runs: set[str]) -> Counter[tuple[str, str]]:
    """(run id, position) -> how many ``step_done`` lines the workers' logs hold for it."""
    done: Counter[tuple[str, str]] = Counter()
    for path in logs:
        for line in path.read_bytes().splitlines():
            event = _event(line)
            if event is not None and event.get("event") == "step_done":
                run_id = str(event.get("run_id"))
                if run_id in runs:
                    done[(run_id, str(event.get("pos")))] += 1
    return done


def _check(
    app: Any, run_ids: list[str], logs: list[Path], report: ChaosReport, max_kills: int
) -> None:
    done = steps_done(logs, set(run_ids))
    report.steps_done_logged = sum(done.values())
    report.repeated_steps = sorted((r, p, n) for (r, p), n in done.items() if n > 1)
    statuses: Counter[str] = Counter()
    for run_id in run_ids:
        detail = app.show(run_id)
        status = detail.run.status
        statuses[str(status)] += 1
        if status != "succeeded":
            report.not_succeeded.append((run_id, str(status)))
        report.steps_journalled += sum(1 for s in detail.steps if s.status == "done")
        if detail.run.claims > 1:
            report.claimed_more_than_once += 1
            if not any(a.action in HANDOVER_ACTIONS for a in detail.audit):
                report.unexplained_handovers.append(run_id)
    report.statuses = dict(statuses)
    if report.not_succeeded:
        shown = ", ".join(f"{r} ({s})" for r, s in report.not_succeeded[:5])
        report.problems.append(
            f"{len(report.not_succeeded)} of {report.runs} runs did not succeed: {shown}"
        )
    if report.repeated_steps:
        shown = ", ".join(f"{r} step {p} x{n}" for r, p, n in report.repeated_steps[:5])
        report.problems.append(f"steps completed more than once: {shown}")
    if report.unexplained_handovers:
        report.problems.append(
            "runs claimed again with no takeover in their audit log: "
            + ", ".join(report.unexplained_handovers[:5])
        )
    if max_kills > 0 and report.kills_holding_a_run == 0:
        report.problems.append(
            "no SIGKILL hit a worker holding a run, so nothing was tested: give the runs "
            "more work (more --runs) or the workers less time (--kill-every)"
        )

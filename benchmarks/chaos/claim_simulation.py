"""Deterministic simulation of the claim / lease / fence / takeover protocol.

Several simulated workers run in one process, one action at a time, over surefoot's real
SQLite journal behind a simulated storage layer that fails a call before it reaches the
journal (not applied), after it (applied, the answer lost) or answers late (time passes
first). Time is a number the simulation advances; the order of actions, the faults, the
time steps and each worker's clock skew all come from one seed (``random.Random(seed)``,
the seed chosen by Hypothesis in the test), so a failing seed replays identically.

After every action the invariants are checked against the journal:

- one holder per (run, epoch): no two workers believe they hold the same run at one epoch;
- the journal is prefix-consistent: a run's steps are 1..k with no gap;
- a step's journalled result never changes once seen, and it was produced by a worker
  holding the epoch the row carries (no write from a stale epoch lands);
- a live holder loses a run only after its lease went unrenewed for a full lease of true
  time (the journal judges a live holder's lease by observation as well as by the wall
  clock, as on SQLite: storage/sql/observed.py), whatever the claimer's clock skew;
- once faults stop, every run finishes, once.

Each worker is a process with a journal of its own (its own observations, on a monotonic
clock that is the simulation's true time) and a liveness lock: now and then one crashes
(its lock is freed, its runs go to whoever's clock says their lease expired) and comes
back later with nothing observed; now and then one is paused between its lease check and
its write (its lock still held) and sends that write when woken, its lease unchecked.

``--plant unfenced`` plants a bug (a worker that rereads the run's epoch and writes with
it, a lease not rechecked: etcd 3.4.3's lock finding) that the invariants must catch;
``--plant wallclock`` judges leases by the wall clock alone (the rule before observation),
which the live-holder invariant must catch.

    .venv/bin/python benchmarks/chaos/claim_simulation.py [--seeds 200] \
        [--plant unfenced|wallclock]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

LEASE = 10.0
WORKFLOWS = [("wf", "1")]


class SimFault(Exception):
    """The simulated storage lost a call or its answer."""


class Violation(AssertionError):
    """An invariant did not hold."""


@dataclass
class Worker:
    name: str
    skew: float  # this worker's clock minus the true time
    run: str | None = None
    epoch: int = 0
    lease_until: float = 0.0
    next_pos: int = 1
    alive: bool = True  # its process runs (its liveness lock is held)
    paused: bool = False  # stopped between its lease check and its write
    journal: Any = None  # its own: what it observed is its own


@dataclass
class Sim:
    seed: int
    runs: int = 3
    steps: int = 4
    workers: int = 3
    fault_rate: float = 0.2
    plant: str | None = None
    now: float = 1000.0
    trace: list[str] = field(default_factory=list)
    faults: int = 0
    actions: int = 0
    journal: Any = None
    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    # run id -> (epoch, lease_until, holder, true time the lease was last written)
    leases: dict[str, tuple[int, float | None, str | None, float]] = field(default_factory=dict)
    crashes: int = 0
    observed_takeovers: int = 0

    def call(self, rnd: random.Random, what: str, fn: Any) -> Any:
        """A storage call through the simulated layer."""
        roll = rnd.random() if self.fault_rate else 1.0
        if roll < self.fault_rate / 3:
            self.faults += 1
            self.trace.append(f"  {what}: lost before")
            raise SimFault(what)
        if roll < 2 * self.fault_rate / 3:
            self.faults += 1
            fn()
            self.trace.append(f"  {what}: applied, answer lost")
            raise SimFault(what)
        if roll < self.fault_rate:
            self.faults += 1
            self.now += rnd.uniform(0, LEASE)  # the answer comes late
            self.trace.append(f"  {what}: answered late (t={self.now:.2f})")
        return fn()

    def act(self, rnd: random.Random, w: Worker) -> None:
        from surefoot.storage.runs import RunWrite, StepWrite

        if not w.alive:  # a crashed worker's process starts again, with nothing observed
            w.alive = True
            w.journal.observed.sightings.keep(set())
            self.trace.append(f"  {w.name} restarts")
            return
        if self.fault_rate and rnd.random() < 0.02:
            w.alive, w.run, w.paused = False, None, False
            self.crashes += 1
            self.trace.append(f"  {w.name} crashes (its liveness lock is free)")
            return
        j = w.journal
        local = self.now + w.skew
        if w.run is None:
            got = self.call(
                rnd,
                f"{w.name} claim",
                lambda: j.claim(
                    w.name, now=local, lease_until=local + LEASE, workflows=WORKFLOWS, limit=1
                ),
            )
            if got:
                (w.run, w.epoch), w.lease_until = got[0], local + LEASE
                w.next_pos = len(j.steps(w.run)) + 1  # replay: continue after the journal
                self.trace.append(f"  {w.name} holds {w.run} epoch {w.epoch}")
            return
        if w.paused:  # woken: it sends the write it was about to send, its lease unchecked
            w.paused = False
            self.trace.append(f"  {w.name} wakes and writes")
        elif local >= w.lease_until:  # its own clock says the lease ran out: it stops
            self.trace.append(f"  {w.name} lets {w.run} go (lease over by its clock)")
            w.run = None
            return
        elif self.fault_rate and rnd.random() < 0.1:  # SIGSTOP between its check and write
            w.paused = True
            self.trace.append(f"  {w.name} paused before its write (holds its lock)")
            return
        elif rnd.random() < 0.3:
            lost = self.call(
                rnd,
                f"{w.name} heartbeat",
                lambda: j.heartbeat(
                    w.name, [(w.run, w.epoch)], lease_until=local + LEASE, now=local
                ),
            )
            if lost:
                self.trace.append(f"  {w.name} lost {w.run} (heartbeat)")
                w.run = None
            else:
                w.lease_until = local + LEASE
            return
        epoch = w.epoch
        if self.plant == "unfenced":  # the planted bug: write with whatever epoch is current
            epoch = j.get_run(w.run).epoch
        if w.next_pos > self.steps:
            rec: Any = RunWrite(w.run, epoch, "succeeded", local, w.name, result='"done"')
        else:
            result = json.dumps(f"{w.run}:{w.next_pos}:{w.name}:{w.epoch}")
            rec = StepWrite(
                w.run, epoch, str(w.next_pos), f"s{w.next_pos}", "step", "done", result,
                None, 1, local, local, order=w.next_pos,
            )  # fmt: skip
        ok = self.call(rnd, f"{w.name} commit {w.run}/{w.next_pos}", lambda: j.commit([rec]))
        if ok == [True]:
            self.trace.append(f"  {w.name} wrote {w.run}/{w.next_pos} at epoch {epoch}")
            if w.next_pos > self.steps:
                w.run = None
            else:
                w.next_pos += 1
        else:
            self.trace.append(f"  {w.name} fenced on {w.run} (epoch {epoch}): it stops")
            w.run = None

    def check(self, ws: list[Worker]) -> None:
        held = [(w.run, w.epoch) for w in ws if w.run is not None]
        if len(held) != len(set(held)):
            raise Violation(f"two holders of one (run, epoch): {held}")
        alive = {w.name for w in ws if w.alive}
        for i in range(self.runs):
            run_id = f"r{i}"
            self.check_lease(run_id, alive)
            rows = sorted(self.journal.steps(run_id), key=lambda s: int(s.pos))
            if [int(s.pos) for s in rows] != list(range(1, len(rows) + 1)):
                raise Violation(f"{run_id}: journal not a prefix: {[s.pos for s in rows]}")
            for s in rows:
                maker_epoch = int(json.loads(s.result or '""').rsplit(":", 1)[1])
                if maker_epoch != s.epoch:
                    raise Violation(
                        f"{run_id}/{s.pos}: written at epoch {s.epoch} by a worker that held "
                        f"epoch {maker_epoch}: a stale holder's write landed"
                    )
                first = self.seen.setdefault((run_id, s.pos), s.result or "")
                if s.result != first:
                    raise Violation(f"{run_id}/{s.pos}: result changed {first} -> {s.result}")

    def check_lease(self, run_id: str, alive: set[str]) -> None:
        """A run moved from a live holder only after its lease went unrenewed for a full
        lease of true time (the claimer's clock skew notwithstanding)."""
        row = self.journal.get_run(run_id)
        before = self.leases.get(run_id)
        stamp = (row.epoch, row.lease_until, row.owner if row.status == "running" else None)
        if before is not None and before[:3] == stamp:
            return
        self.leases[run_id] = (*stamp, self.now)
        if before is None or before[2] is None or row.epoch == before[0]:
            return  # not running before, or renewed by its holder
        holder, written = before[2], before[3]
        if holder in alive and row.owner != holder:
            if self.now - written < LEASE:
                raise Violation(
                    f"{run_id}: taken from live holder {holder} (epoch {before[0]}) by "
                    f"{row.owner} {self.now - written:.2f} s after its last renewal, under a "
                    f"lease of {LEASE:g} s: a live holder's lease judged by a skewed clock"
                )
            self.observed_takeovers += 1


def simulate(seed: int, plant: str | None = None, fault_rate: float = 0.2) -> Sim:
    """One seeded simulation; raises Violation (with the trace) when an invariant breaks."""
    from surefoot import storage
    from surefoot.storage.runs import RunRow

    rnd = random.Random(seed)
    sim = Sim(seed, plant=plant, fault_rate=fault_rate)
    with tempfile.TemporaryDirectory(prefix="sf-sim-") as tmp:
        url = f"sqlite:///{tmp}/sim.db?synchronous=OFF"
        st: Any = storage.open(url)
        sim.journal = st.journal()
        opened = [st]
        try:
            for i in range(sim.runs):
                sim.journal.create_run(
                    RunRow(f"r{i}", "wf", "1", "h", "[[],{}]", "journal", "pending", 0, 0)
                )
            ws = [Worker(f"w{k}", rnd.uniform(-LEASE / 2, LEASE / 2)) for k in range(sim.workers)]
            for w in ws:  # each worker a process: its own journal, observations and clock
                opened.append(storage.open(url))
                w.journal = opened[-1].journal()
                obs = w.journal.observed  # the simulation's liveness locks and true time
                obs.alive = lambda owners: {x.name for x in ws if x.alive} & owners
                obs.sightings.monotonic = lambda: sim.now
                if plant == "wallclock":  # the rule before observation: the wall clock alone
                    obs.alive = lambda owners: set()
            try:
                for phase, rate in (("faults", fault_rate), ("quiet", 0.0)):
                    sim.fault_rate = rate
                    limit = 150 if phase == "faults" else 600
                    for _ in range(limit):
                        if phase == "quiet" and all(
                            sim.journal.get_run(f"r{i}").status == "succeeded"
                            for i in range(sim.runs)
                        ):
                            break
                        w = rnd.choice(ws)
                        sim.now += rnd.choice((0.0, 0.1, 1.0, rnd.uniform(0, 2 * LEASE)))
                        sim.actions += 1
                        sim.trace.append(f"t={sim.now:.2f} {w.name}")
                        try:
                            sim.act(rnd, w)
                        except SimFault:
                            pass  # the worker does not know; it acts again later
                        sim.check(ws)
                statuses = [sim.journal.get_run(f"r{i}").status for i in range(sim.runs)]
                if statuses != ["succeeded"] * sim.runs:
                    raise Violation(f"runs not finished once faults stopped: {statuses}")
            except Violation as exc:
                exc.add_note(f"seed {seed}; last actions:\n" + "\n".join(sim.trace[-25:]))
                raise
        finally:
            for s in opened:
                s.close()
    return sim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--plant", choices=["unfenced", "wallclock"])
    args = ap.parse_args()
    began = time.monotonic()
    actions = faults = crashes = observed = 0
    failed = []
    for seed in range(args.first, args.first + args.seeds):
        try:
            sim = simulate(seed, args.plant)
            actions += sim.actions
            faults += sim.faults
            crashes += sim.crashes
            observed += sim.observed_takeovers
        except Violation as exc:
            failed.append((seed, str(exc).splitlines()[0]))
    print(
        f"== claim simulation: {args.seeds} seeds, {actions} actions, {faults} faults "
        f"injected, {crashes} crashes, {observed} live holders' runs taken after a lease "
        f"unrenewed, {len(failed)} seeds violated an invariant"
        f"{' (planted: ' + args.plant + ')' if args.plant else ''}; "
        f"{time.monotonic() - began:.0f} s, date "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    for seed, why in failed[:5]:
        print(f"  seed {seed}: {why}")
    return 1 if failed and not args.plant else 0


if __name__ == "__main__":
    sys.exit(main())

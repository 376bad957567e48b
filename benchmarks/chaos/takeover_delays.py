"""How long a durable run held by a worker that was SIGKILLed, or SIGSTOPped, takes to move
to a standby worker on SQLite: the price of judging a live holder's lease by observation.

    .venv/bin/python benchmarks/chaos/takeover_delays.py [--lease 2] [--repeat 5] \
        [--json report.json]

Worker A holds a run (a 60 s step) and renews its lease every third of it; worker B (the
standby, polling every 0.05 s) serves the same workflow. A is then SIGKILLed (its liveness
lock is freed: B takes the run over at once, lease or not) or SIGSTOPped (it keeps its
lock: B takes the run over once the lease has expired, and, since B judges a live
holder's lease by observation too, once it has seen it unchanged for a lease of its own).
Measured: seconds from the signal until the run's epoch moves, on the script's monotonic
clock, and for a stopped holder also from its last renewal (the lease written minus the
lease). Only processes this script started are signalled, by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from paused_holders import finish, ledger_rows, start, wait  # noqa: E402


def once(how: str, lease: float, tmp: Path) -> dict[str, Any]:
    import paused_app  # the app module the workers load too

    ledger = tmp / f"ledger-{uuid.uuid4().hex[:6]}.db"
    os.environ["SUREFOOT_LEDGER"] = str(ledger)
    url = f"sqlite:///{tmp / 'store.db'}"
    app = paused_app.app
    app.configure(url=url)
    run_id = f"{how}-{uuid.uuid4().hex[:6]}"
    app.enqueue("stuck", 60.0, run_id=run_id)

    def worker(name: str) -> Any:
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app"]
        cmd += ["paused_app:app", "--lease", str(lease), "--poll", "0.05", "--worker-id", name]
        env = {"PYTHONPATH": str(HERE), "SUREFOOT_LEDGER": str(ledger), "SUREFOOT_WORKER": name}
        return start(cmd, env)

    a = worker("A")
    b = None
    try:
        wait(lambda: any(r["name"] == "slow" for r in ledger_rows(ledger)), 60, "A's slow step")
        b = worker("B")
        wait(lambda: "B" in {w.worker_id for w in app.workers()}, 60, "B to serve")
        time.sleep(lease)  # A renews a few times while B watches
        row = app.show(run_id).run
        epoch, until = row.epoch, row.lease_until
        sent = time.monotonic()
        a.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        if how == "stop":  # A renews no more: its last lease (B waits some seconds more)
            until = app.show(run_id).run.lease_until
        wait(lambda: app.show(run_id).run.epoch != epoch, 120, "B to take the run over")
        moved, moved_at = time.monotonic() - sent, time.time()
        taken = [e for e in app.show(run_id).audit if e.action == "taken_over"]
        out: dict[str, Any] = {
            "how": how,
            "seconds_to_move": round(moved, 3),
            "reason": taken[-1].detail.get("reason") if taken else None,
            "new_owner": app.show(run_id).run.owner,
        }
        if until is not None:  # after the lease A last wrote ran out (negative: before)
            out["after_lease_expiry"] = round(moved_at - until, 3)
        return out
    finally:
        finish(a, *(p for p in (b,) if p is not None))
        app.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lease", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    for how in ("kill", "stop"):
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="sf-takeover-") as t:
                r = once(how, args.lease, Path(t))
            results.append(r)
            print(
                f"{how:5} moved after {r['seconds_to_move']:.3f} s, "
                f"{r.get('after_lease_expiry')} s after the lease ({r['reason']})",
                flush=True,
            )
    for how in ("kill", "stop"):
        s = [r["seconds_to_move"] for r in results if r["how"] == how]
        print(
            f"== {how}: lease {args.lease:g} s, {len(s)} runs, seconds from the signal to the "
            f"move: median {statistics.median(s):.2f}, min {min(s):.2f}, max {max(s):.2f}"
        )
    print(
        f"   date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

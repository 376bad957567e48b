"""How long a durable run, an idempotency key or a Store lock whose holder was SIGKILLed, or
SIGSTOPped, takes to move to another process on SQLite: the price of judging a live
holder's lease by observation as well as by the wall clock.

    .venv/bin/python benchmarks/chaos/takeover_delays.py [--lease 2] [--key-lease 3] \
        [--repeat 5] [--json report.json]

Run: worker A holds a run (a 60 s step) and renews its lease every third of it; worker B
(polling every 0.05 s) serves the same workflow. Key and lock: A holds the key (its action
sleeps 60 s) or the lock (no renewal), B already tries every 0.05 s. A is then SIGKILLed
(its liveness lock is freed) or SIGSTOPped (it keeps it). Measured: for the run, seconds
from the signal until its epoch moves (on this script's monotonic clock); for all three,
when B got it after the lease A last wrote ran out (wall clock; every process here shares
it: negative, before the lease ran out). Only processes this script started are
signalled, by pid.
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
from paused_holders import finish, first_line, ledger_rows, start, wait  # noqa: E402


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


KEY = """
import json, sys, time
from surefoot.resilience import IdempotentExecutor
url, name, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
ex = IdempotentExecutor(url, lease=lease, wait=True, wait_timeout=120, poll=0.05)
def act():
    rec = ex.store.get("K")
    print(json.dumps({"started": name, "at": time.time(), "until": rec.lease_until}), flush=True)
    time.sleep(60)
    return name
print(json.dumps({"trying": name}), flush=True)
ex.run("K", act)
"""

LOCK = """
import json, sys, time
from surefoot.statebus import Store
url, name, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store(url)
print(json.dumps({"trying": name}), flush=True)
while (lease := store.acquire("L", name, ttl=ttl)) is None:
    time.sleep(0.05)
print(json.dumps({"started": name, "at": time.time(), "until": lease.expires_at}), flush=True)
time.sleep(60)
"""


def held(how: str, what: str, lease: float, tmp: Path) -> dict[str, Any]:
    """An idempotency key's or a Store lock's holder A (no renewal: a lease of ``lease``
    seconds) is signalled a second after it took it; B was already trying. Measured: when
    B got it, after A's lease ran out (A's ``lease_until`` / ``expires_at``)."""
    url = f"sqlite:///{tmp / 'store.db'}"
    src = KEY if what == "key" else LOCK

    def child(name: str) -> Any:
        return start([sys.executable, "-c", src, url, name, str(lease)], {})

    a = child("A")
    b = None
    try:
        first_line(a)  # trying
        got = first_line(a)  # A holds it
        b = child("B")
        first_line(b)  # B tries, every 0.05 s
        time.sleep(1.0)
        a.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        mine = first_line(b)
        return {
            "how": how,
            "what": what,
            "after_lease_expiry": round(float(mine["at"]) - float(got["until"]), 3),
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lease", type=float, default=2.0)
    ap.add_argument("--key-lease", type=float, default=3.0, help="the key's and the lock's")
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
    for what in ("key", "lock"):
        for how in ("kill", "stop"):
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory(prefix="sf-takeover-") as t:
                    r = held(how, what, args.key_lease, Path(t))
                results.append(r)
                print(f"{what} {how:5} taken {r['after_lease_expiry']} s after the lease")
    for how in ("kill", "stop"):
        s = [r["seconds_to_move"] for r in results if r["how"] == how and "what" not in r]
        e = [r["after_lease_expiry"] for r in results if r["how"] == how and "what" not in r]
        print(
            f"== run {how}: lease {args.lease:g} s, {len(s)} runs, seconds from the signal to "
            f"the move: median {statistics.median(s):.2f}, min {min(s):.2f}, max "
            f"{max(s):.2f}; after the lease: median {statistics.median(e):.2f}"
        )
    for what in ("key", "lock"):
        for how in ("kill", "stop"):
            e = [
                r["after_lease_expiry"]
                for r in results
                if r.get("what") == what and r["how"] == how
            ]
            print(
                f"== {what} {how}: lease {args.key_lease:g} s, {len(e)} runs, seconds after the "
                f"lease: median {statistics.median(e):.2f}, min {min(e):.2f}, max {max(e):.2f}"
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

"""Skewed contenders: a live holder of a durable run, an idempotency key or a Store lock
keeps working (its heartbeats and its lease are fine) while a second process whose clock is
moved by ``faketime`` (0, -30 s, +30 s) tries to take the same thing. The companion of
``paused_holders.py`` (there the holder is frozen; here it is alive).

    .venv/bin/python benchmarks/chaos/skewed_contenders.py --backend sqlite|postgres|redis \
        [--scenario journal|key|lock|all] [--skews 0,-30,30] [--json report.json]

Pass, per scenario: the contender takes nothing over from the live holder (no
``taken_over`` audit entry, no step or effect executed by it, its lock or key claim refused
while the holder works), and no stale write lands. A contender 30 s ahead sees a lease
written by the holder's clock as expired 30 s early: on PostgreSQL leases are judged on the
database's clock (``ServerClock``), so it must take nothing; on SQLite a live holder's lease
is also judged by observation (the contender must see it unchanged for a full lease on its
own monotonic clock), so it must take nothing there either (docs/reliability.md §3). Redis
holds Store locks only; they are judged on its ``TIME``. Only processes this script
started are signalled, by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from paused_holders import (  # noqa: E402
    CLOCK,
    child,
    finish,
    first_line,
    ledger_rows,
    rest,
    start,
    store_url,
    wait,
)

LEASE = 3.0  # the live holder's: it renews every lease / 3, so load cannot make it lapse
HOLD = 6.0  # seconds the holder works: two leases, so renewals are needed
RUN_HOLD = 12.0  # the durable run's step: a worker starting under load takes seconds


def journal_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:
    import paused_app  # the app module the workers load too

    ledger = tmp / "ledger.db"
    os.environ["SUREFOOT_LEDGER"] = str(ledger)
    app = paused_app.app
    app.configure(url=url)
    run_id = f"live-{uuid.uuid4().hex[:6]}"
    h = app.enqueue("stuck", RUN_HOLD, run_id=run_id)

    def worker(name: str, skew: int = 0) -> Any:
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app"]
        cmd += ["paused_app:app", "--lease", str(LEASE), "--poll", "0.05", "--worker-id", name]
        env = {"PYTHONPATH": str(HERE), "SUREFOOT_LEDGER": str(ledger), "SUREFOOT_WORKER": name}
        return start(cmd, env, skew)

    a = worker("A")
    b = None
    try:
        wait(lambda: any(r["name"] == "slow" for r in ledger_rows(ledger)), 30, "A's slow step")
        b = worker("B", skew)  # the contender, polling every 0.05 s while A works
        ended = ("succeeded", "failed", "needs_attention", "cancelled")
        wait(lambda: h.status() in ended, 60, "the run to end")
        detail = app.show(run_id)
        rows = ledger_rows(ledger)
        takeovers = [e for e in detail.audit if e.action == "taken_over"]
        by_b = [r for r in rows if r["worker"] == "B"]
        stale = [s for s in detail.steps if s.epoch != detail.run.epoch]
        return {
            "status": detail.run.status,
            "owner": detail.run.owner,
            "takeovers_of_live_holder": len(takeovers),
            "contender_executions": len(by_b),
            "stale_writes_landed": len(stale),
            "fenced_writes": sum(1 for e in detail.audit if e.action == "lease_lost"),
            "effects_applied": sum(r["applied"] for r in rows if r["kind"] == "effect"),
            "ok": detail.run.status == "succeeded" and not takeovers and not by_b and not stale,
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))
        app.close()


KEY_HOLDER = """
import json, sys, time
from surefoot.resilience import IdempotentExecutor
url, name, hold, ledger = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
sys.path.insert(0, sys.argv[5])
import os; os.environ["SUREFOOT_LEDGER"] = ledger; os.environ["SUREFOOT_WORKER"] = name
from paused_app import ledger as record
ex = IdempotentExecutor(url, lease=%(lease)s, wait=True, wait_timeout=60, poll=0.05)
def act(key):
    print(json.dumps({"started": name}), flush=True)
    time.sleep(hold)
    record("effect", "act", key)
    return name
print(json.dumps({"trying": name}), flush=True)
out = ex.run("K", act, "K")
print(json.dumps({"returned": out, "saved": ex.store.get("K").result}), flush=True)
ex.close()
"""


def key_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:

    ledger = str(tmp / "key-ledger.db")
    src = KEY_HOLDER % {"lease": 2 * HOLD}  # no renewal: the lease outlasts the action
    a = child(src.replace("%", "%%"), [url, "A", str(HOLD), ledger, str(HERE)])
    b = None
    try:
        first_line(a)  # trying
        first_line(a)  # A holds the key and its action runs
        b = child(src.replace("%", "%%"), [url, "B", "0.1", ledger, str(HERE)], skew)
        b_out = [first_line(b), *rest(b)]
        a_out = rest(a)
        rows = [r for r in ledger_rows(Path(ledger)) if r["kind"] == "effect"]
        by_b = [r for r in rows if r["worker"] == "B"]
        taken = any("started" in x for x in b_out)
        return {
            "holder": a_out,
            "contender": b_out,
            "takeovers_of_live_holder": int(taken),
            "contender_executions": len(by_b),
            # the completion of a holder whose claim was taken over is stale
            "stale_writes_landed": int(taken and a_out[-1]["saved"] == '"A"'),
            "effects_applied": sum(r["applied"] for r in rows),
            "ok": not by_b and b_out[-1] == {"returned": "A", "saved": '"A"'},
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))


LOCK_HOLDER = """
import json, sys, time
from surefoot.errors import ConflictError
from surefoot.statebus import Store
url, name, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store(url)
deadline = time.monotonic() + 60
tries = 0
while (lease := store.acquire("L", name, ttl=%(lease)s)) is None:
    assert time.monotonic() < deadline, "never acquired"
    tries += 1
    time.sleep(0.05)
print(json.dumps({"acquired": name, "epoch": lease.epoch, "refused": tries}), flush=True)
time.sleep(hold)
try:
    store.write("guarded", name, fence=lease)
    print(json.dumps({"fenced_write": "written"}), flush=True)
except ConflictError:
    print(json.dumps({"fenced_write": "refused"}), flush=True)
store.release(lease)
store.close()
"""


def lock_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:

    from surefoot.statebus import Store

    src = (LOCK_HOLDER % {"lease": 2 * HOLD}).replace("%", "%%")
    a = child(src, [url, "A", str(HOLD)])
    b = None
    try:
        got_a = first_line(a)
        b = child(src, [url, "B", "0"], skew)  # tries every 0.05 s while A holds it
        b_out = [first_line(b), *rest(b)]
        a_out = rest(a)
        store = Store(url)
        written = [c.value for c in store.history("guarded")]
        store.close()
        return {
            "epochs": [got_a["epoch"], b_out[0]["epoch"]],
            "contender_refused": b_out[0]["refused"],
            "holder_write": a_out[-1]["fenced_write"],
            "guarded_history": written,
            "takeovers_of_live_holder": int(written[:1] != ["A"]),
            "stale_writes_landed": int("A" in written[1:]),
            "ok": a_out[-1]["fenced_write"] == "written" and written == ["A", "B"],
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))


SCENARIOS = {"journal": journal_scenario, "key": key_scenario, "lock": lock_scenario}
_SHOWN = ("backend", "scenario", "skew", "ok", "seconds", "holder", "contender")


REDIS_URL = os.environ.get("SUREFOOT_REDIS_URL", "redis://127.0.0.1:6379/0")


def run(backend: str, scenario: str, skew: int) -> dict[str, Any]:
    tag = f"sfskew_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="sf-skewed-") as t:
        tmp = Path(t)
        # Redis offers Store locks only (no journal, no idempotency keys)
        url = f"{REDIS_URL}?prefix={tag}" if backend == "redis" else store_url(backend, tmp, tag)
        began = time.monotonic()
        try:
            facts = SCENARIOS[scenario](url, skew, tmp)
        finally:
            if backend in ("postgres", "redis"):
                from surefoot import storage

                st: Any = storage.open(url)
                if backend == "postgres":
                    st.db.drop_schema()
                else:
                    st.db.delete_prefix()
                st.close()
        return {
            "backend": backend,
            "scenario": scenario,
            "skew": skew,
            "seconds": round(time.monotonic() - began, 1),
            **facts,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="sqlite")
    ap.add_argument(
        "--scenario", default="all", help=f"all, or some of {','.join(SCENARIOS)} (commas)"
    )
    ap.add_argument("--skews", default="0,-30,30", help="the contender's, seconds")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--clock", choices=["libfaketime", "python"], default="libfaketime")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    CLOCK["how"] = args.clock
    scenarios = list(SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {unknown[0]!r}; use all, or some of {', '.join(SCENARIOS)}")
    if args.backend == "redis":
        scenarios = [s for s in scenarios if s == "lock"]
    results = []
    for skew in (int(s) for s in args.skews.split(",")):
        for scenario in scenarios:
            r = run(args.backend, scenario, skew)
            results.append(r)
            print(
                f"{args.backend:8} {scenario:8} contender skew {skew:+3d} s: "
                f"{'kept' if r['ok'] else 'TAKEN OVER'} ({r['seconds']} s) "
                f"{ {k: v for k, v in r.items() if k not in _SHOWN} }",
                flush=True,
            )
    # Guaranteed: no stale write anywhere, no takeover of a live holder at any clock.
    broken = [r for r in results if r["stale_writes_landed"] or not r["ok"]]
    taken = sum(r["takeovers_of_live_holder"] for r in results)
    stale = sum(r["stale_writes_landed"] for r in results)
    print(
        f"== skewed contenders on {args.backend} ({args.clock}): {len(results)} scenarios, "
        f"takeovers of live holders {taken}, stale writes landed {stale}, "
        f"failed {sum(not r['ok'] for r in results)} (guarantees broken {len(broken)}); "
        f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

"""Paused holders and skewed clocks: a worker holding a durable run, an idempotency key or
a Store lock is frozen (SIGSTOP) past its lease, another takes over, then the first is woken
(SIGCONT), its clock optionally skewed by ``faketime``; the etcd 3.4.3 unsafe-lock finding
(a lease not rechecked after a wait) is the anchor.

    .venv/bin/python benchmarks/chaos/paused_holders.py --backend sqlite|postgres \
        [--scenario journal|key|lock|all] [--skews 0,-30,30] [--json report.json]

Pass, per scenario: no journal write from the stale epoch lands (every step row carries the
new holder's epoch), the stale holder's effect carries the same key as the new holder's (the
ledger, a service deduplicating by key, applies it once), the stale idempotency claim cannot
complete over the new one, the stale lock holder's fenced write is refused, and the stale
holder stops by itself (it records ``lease_lost`` / is refused, without being killed).
On SQLite a skew of +30 s makes the frozen holder's lease look 30 s longer to everyone
else, so the takeover waits that long, and -30 s makes it look expired at once; on
PostgreSQL leases are on the database's clock (``ServerClock``), so the skew changes
nothing. Only processes this script started are signalled, by pid; servers are on
127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PG_URL = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
LEASE = 1.0


LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def libfaketime() -> str | None:
    """libfaketime's library, when installed (Debian's ``faketime`` package)."""
    for path in (LIBFAKETIME, LIBFAKETIME.replace("x86_64", "aarch64")):
        if Path(path).exists():
            return path
    return None


CLOCK = {"how": "libfaketime"}  # or "python": see skewed_clock/sitecustomize.py


def skewed(skew: int) -> dict[str, str]:
    """The environment that runs a process with its clocks moved ``skew`` seconds.

    libfaketime is preloaded directly, not through the ``faketime`` command: that one forks
    and waits, so a signal to its pid (SIGSTOP, SIGTERM) would miss the program. libfaketime
    0.9.10 moves the monotonic clock by the same constant (durations inside the process
    stay right); asking it not to (``FAKETIME_DONT_FAKE_MONOTONIC=1``) makes every Python
    ``time.sleep`` fail with EINVAL (its ``clock_nanosleep`` wrapper), so it is not set."""
    if not skew:
        return {}
    if CLOCK["how"] == "python":
        path = os.pathsep.join([str(HERE / "skewed_clock"), str(HERE)])
        return {"SUREFOOT_SKEW": str(skew), "PYTHONPATH": path}
    lib = libfaketime()
    if lib is None:
        raise SystemExit("libfaketime is not installed (apt-get install -y faketime)")
    return {"LD_PRELOAD": lib, "FAKETIME": f"{skew:+d}s"}


def start(cmd: list[str], env: dict[str, str], skew: int = 0) -> subprocess.Popen[str]:
    full = {**os.environ, **env, **skewed(skew)}  # (the skew's PYTHONPATH includes HERE)
    # PYTHONPATHs add up: a checkout's own src (given to this script) must stay first.
    paths = [e.get("PYTHONPATH", "") for e in (skewed(skew), env, os.environ)]
    full["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, text=True)


def wait(pred: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def finish(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def ledger_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=30) as c:
        try:
            cur = c.execute("SELECT kind, name, key, worker, applied FROM calls ORDER BY id")
        except sqlite3.OperationalError:
            return []
        return [
            dict(zip(("kind", "name", "key", "worker", "applied"), r, strict=True)) for r in cur
        ]


# -- a durable run ----------------------------------------------------------------------------


def journal_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import paused_app  # the app module the workers load too

    ledger = tmp / "ledger.db"
    os.environ["SUREFOOT_LEDGER"] = str(ledger)
    app = paused_app.app
    app.configure(url=url)
    run_id = f"held-{uuid.uuid4().hex[:6]}"
    h = app.enqueue("stuck", 2.0, run_id=run_id)

    def worker(name: str, lease: float, skew: int = 0) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app"]
        cmd += ["paused_app:app", "--lease", str(lease), "--poll", "0.05", "--worker-id", name]
        env = {"PYTHONPATH": str(HERE), "SUREFOOT_LEDGER": str(ledger), "SUREFOOT_WORKER": name}
        return start(cmd, env, skew)

    a = worker("A", LEASE, skew)
    b = None
    try:
        wait(lambda: any(r["name"] == "slow" for r in ledger_rows(ledger)), 30, "A's slow step")
        a.send_signal(signal.SIGSTOP)
        wait(lambda: (app.show(run_id).run.lease_until or 0) < time.time(), 45, "A's lease")
        b = worker("B", 5.0)
        # B's epoch, not B as owner: B may take over and finish between two looks
        wait(lambda: app.show(run_id).run.epoch > 1, 30, "B to take over")
        a.send_signal(signal.SIGCONT)
        ended = ("succeeded", "failed", "needs_attention", "cancelled")
        try:
            wait(lambda: h.status() in ended, 60, "the run to end")
        except AssertionError:
            pass  # reported below as not live
        stale = lambda: [  # noqa: E731
            e for e in app.show(run_id).audit if e.action == "lease_lost" and e.actor == "A"
        ]
        try:
            wait(lambda: stale(), 20, "A to stop by itself (lease_lost)")
        except AssertionError:
            pass
        detail = app.show(run_id)
        rows = ledger_rows(ledger)
        effects = [r for r in rows if r["kind"] == "effect"]
        status = detail.run.status
        safe = len({r["key"] for r in effects}) <= 1 and sum(r["applied"] for r in effects) <= 1
        if status == "succeeded":  # one takeover: every step row is the new holder's
            safe = safe and all(s.epoch == detail.run.epoch for s in detail.steps)
        return {
            "status": status,
            "epoch": detail.run.epoch,
            "stale_epoch": stale()[0].detail.get("epoch") if stale() else None,
            "step_epochs": sorted({s.epoch for s in detail.steps}),
            "fenced_writes": sum(1 for e in detail.audit if e.action == "lease_lost"),
            "effect_keys": sorted({r["key"] for r in effects}),
            "effects_applied": sum(r["applied"] for r in effects),
            "effect_executions": len(effects),
            "stale_stopped": bool(stale()),
            # liveness: the run finished once and the stale holder stopped by itself
            "live": status == "succeeded" and bool(stale()),
            "ok": safe,
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))
        app.close()


# -- an idempotency key and a Store lock: small child programs --------------------------------

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
    record("effect", "act", key)          # the effect carries the idempotency key
    return name
out = ex.run("K", act, "K")
rec = ex.store.get("K")
print(json.dumps({"returned": out, "saved": rec.result}), flush=True)
ex.close()
"""

LOCK_HOLDER = """
import json, sys, time
from surefoot.errors import ConflictError
from surefoot.statebus import Store
url, name, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store(url)
deadline = time.monotonic() + 60
while (lease := store.acquire("L", name, ttl=%(lease)s)) is None:
    assert time.monotonic() < deadline, "never acquired"
    time.sleep(0.05)
print(json.dumps({"acquired": name, "epoch": lease.epoch}), flush=True)
time.sleep(hold)
try:
    store.write("guarded", name, fence=lease)
    print(json.dumps({"fenced_write": "written"}), flush=True)
except ConflictError:
    print(json.dumps({"fenced_write": "refused"}), flush=True)
store.close()
"""


def child(source: str, args: list[str], skew: int = 0) -> subprocess.Popen[str]:
    return start([sys.executable, "-c", source % {"lease": LEASE}, *args], {}, skew)


def first_line(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    return dict(json.loads(p.stdout.readline()))


def rest(p: subprocess.Popen[str]) -> list[dict[str, Any]]:
    # Not communicate(timeout=...): it reads the pipe's descriptor, past the lines that
    # first_line's readline already buffered (a child printing two lines at once lost its
    # second). The children print a few lines, far below a pipe's capacity.
    assert p.stdout is not None
    p.wait(timeout=90)
    out = p.stdout.read()
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def key_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:
    ledger = str(tmp / "key-ledger.db")
    a = child(KEY_HOLDER, [url, "A", "3", ledger, str(HERE)], skew)
    b = None
    try:
        first_line(a)  # A holds the key and its action is running
        a.send_signal(signal.SIGSTOP)
        b = child(KEY_HOLDER, [url, "B", "0.1", ledger, str(HERE)])
        b_out = [first_line(b), *rest(b)]  # waits out A's lease, takes over, finishes
        a.send_signal(signal.SIGCONT)
        a_out = rest(a)
        rows = [r for r in ledger_rows(Path(ledger)) if r["kind"] == "effect"]
        final = a_out[-1]
        return {
            "new_holder": b_out,
            "stale_holder": a_out,
            "effect_keys": sorted({r["key"] for r in rows}),
            "effect_executions": len(rows),
            "effects_applied": sum(r["applied"] for r in rows),
            "ok": final["returned"] == "B"
            and final["saved"] == '"B"'
            and sum(r["applied"] for r in rows) == 1
            and {r["key"] for r in rows} == {"K"},
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))


def lock_scenario(url: str, skew: int, tmp: Path) -> dict[str, Any]:
    from surefoot.statebus import Store

    a = child(LOCK_HOLDER, [url, "A", "2"], skew)
    b = None
    try:
        got_a = first_line(a)
        a.send_signal(signal.SIGSTOP)
        b = child(LOCK_HOLDER, [url, "B", "0"])
        b_out = [first_line(b), *rest(b)]
        a.send_signal(signal.SIGCONT)
        a_out = rest(a)
        store = Store(url)
        written = [c.value for c in store.history("guarded")]
        store.close()
        return {
            "epochs": [got_a["epoch"], b_out[0]["epoch"]],
            "stale_write": a_out[-1]["fenced_write"],
            "new_write": b_out[-1]["fenced_write"],
            "guarded_history": written,
            "ok": a_out[-1]["fenced_write"] == "refused" and written == ["B"],
        }
    finally:
        finish(a, *(p for p in (b,) if p is not None))


_SHOWN = ("backend", "scenario", "skew", "ok", "seconds", "live")
SCENARIOS = {"journal": journal_scenario, "key": key_scenario, "lock": lock_scenario}


def store_url(backend: str, tmp: Path, tag: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp / 'store.db'}"
    if backend == "postgres":
        return f"{PG_URL}?schema={tag}"
    raise SystemExit(f"backend must be sqlite or postgres, got {backend!r}")


def run(backend: str, scenario: str, skew: int) -> dict[str, Any]:
    tag = f"sfpause_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="sf-paused-") as t:
        tmp = Path(t)
        url = store_url(backend, tmp, tag)
        began = time.monotonic()
        try:
            facts = SCENARIOS[scenario](url, skew, tmp)
        finally:
            if backend == "postgres":
                from surefoot import storage

                st: Any = storage.open(url)
                st.db.drop_schema()
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
    ap.add_argument("--scenario", default="all", choices=["all", *SCENARIOS])
    ap.add_argument("--skews", default="0,-30,30", help="seconds, comma-separated")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument(
        "--clock",
        choices=["libfaketime", "python"],
        default="libfaketime",
        help="how to skew: libfaketime (every clock call; its timed waits hang) or python "
        "(time.time only)",
    )
    args = ap.parse_args()
    # A SIGTERM (make's, timeout's) ends the run through its finally blocks, so the
    # processes it started are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    CLOCK["how"] = args.clock
    scenarios = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    results = []
    for skew in (int(s) for s in args.skews.split(",")):
        for scenario in scenarios:
            r = run(args.backend, scenario, skew)
            results.append(r)
            live = "" if r.get("live", True) else ", NOT LIVE"
            print(
                f"{args.backend:8} {scenario:8} skew {skew:+3d} s: "
                f"{'safe' if r['ok'] else 'VIOLATED'}{live} ({r['seconds']} s) "
                f"{ {k: v for k, v in r.items() if k not in _SHOWN} }"
            )
    bad = [r for r in results if not r["ok"]]
    stuck = [r for r in results if not r.get("live", True)]
    print(
        f"== paused holders on {args.backend}: {len(results)} scenarios, faults injected "
        f"{len(results)} SIGSTOP/SIGCONT pairs, safety violations {len(bad)}, "
        f"runs not live {len(stuck)}; "
        f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

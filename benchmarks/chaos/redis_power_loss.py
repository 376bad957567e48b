"""A power loss under Redis: a private ``redis-server`` keeps its append-only file on
``lossyfs`` (the FUSE file system that loses unsynced writes), surefoot's Store writes to
it, everything is frozen at a seeded moment (SIGSTOP), the power is cut, and a new server
loads what the disk kept. Redis documents the bound: ``appendfsync always`` loses nothing
acknowledged, ``everysec`` up to about a second (two when fsync is slow).

    .venv/bin/python benchmarks/chaos/redis_power_loss.py [--seconds 4] [--seeds 2]

A write is acknowledged when ``Store.write`` returned; the writer logs it, with the time,
outside the mount, line-buffered, only then. Reported per cut: acknowledged, lost, and the
oldest lost write's age at the cut (ms). Pass: ``always`` loses none; ``everysec`` loses
only writes acknowledged within 2 s of the cut, and the server starts from its file (with
``--torn``, after ``redis-check-aof --fix`` where it refuses a file with a garbage tail).
Needs what power_loss.py needs, and ``redis-server``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from power_loss import Mount, fuse_unavailable
from private_redis import PrivateRedis, redis_server

WRITER = """
import sys, time
from surefoot.statebus import Store
url, log = sys.argv[1], sys.argv[2]
out = open(log, "a", buffering=1)
store = Store(url)
i = 0
while True:
    store.write(f"k{i}", i)
    out.write(f"ack {i} {time.monotonic():.6f}\\n")
    i += 1
"""

#: Redis's own words for everysec: "you may lose 1 second of data"; a slow fsync can delay
#: the write up to 2 s more (its log says so), hence this bound.
EVERYSEC_BOUND_MS = 2000.0


def check_aof_fix(folder: Path) -> str:
    """``redis-check-aof --fix`` on the append-only file's manifest (it truncates the file
    at the first bad command, after asking); its last line."""
    manifest = next(folder.glob("appendonlydir/*.manifest"))
    done = subprocess.run(
        ["redis-check-aof", "--fix", str(manifest)],
        input="y\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[-1] if lines else ""


def redis_cut(
    tmp: Path, mode: str, seconds: float, seed: int, torn: bool = False
) -> dict[str, Any]:
    """One cut; ``torn``: the last unsynced write torn too (a file tail of garbage, which
    Redis refuses to load until ``redis-check-aof --fix``, as it documents)."""
    case = tmp / f"redis-{mode}-{seed}{'-torn' if torn else ''}"
    backing, log = case / "backing", case / "acks.log"
    backing.mkdir(parents=True)
    mount = Mount(backing, case / "mnt", seed)
    server: PrivateRedis | None = None
    writer: subprocess.Popen[bytes] | None = None
    try:
        server = PrivateRedis(mount.mnt / "data", mode, logfile=case / "redis-1.log")
        url = f"{server.url}?prefix=pw&reconnect_timeout=2"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(random.Random(seed).uniform(seconds / 2, seconds))
        # The power goes: everything stops at once (frozen, then cut), nothing after it.
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)  # ours, by pid
        writer.send_signal(signal.SIGSTOP)
        cut_at = time.monotonic()
        cut = mount.cut(torn=torn)
    finally:
        for p in (writer, server.proc if server else None):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)  # ours, by pid
                p.wait()
        mount.close()
    acks = [x.split() for x in log.read_text().splitlines() if x.startswith("ack ")]
    acked = {int(a[1]): float(a[2]) for a in acks}
    again = Mount(backing, case / "mnt2", seed)
    error, present, fixed, refused = None, set(), None, False
    try:
        try:
            back = PrivateRedis(again.mnt / "data", mode, logfile=case / "redis-2.log")
        except RuntimeError as exc:
            back, error = None, str(exc)[-300:]
            if "Bad file format" in error:  # what Redis says to do: redis-check-aof --fix
                refused = True
                fixed = check_aof_fix(again.mnt / "data")
                back = PrivateRedis(again.mnt / "data", mode, logfile=case / "redis-3.log")
                error = None
        if back is not None:
            from surefoot.statebus import Store

            store = Store(f"{back.url}?prefix=pw")
            try:
                present = {int(k[1:]) for k in store.snapshot()}
            finally:
                store.close()
                back.close()
    finally:
        again.close()
    lost = sorted(i for i in acked if i not in present)
    ages = [round((cut_at - acked[i]) * 1000, 1) for i in lost]
    bound = 0.0 if mode == "always" else EVERYSEC_BOUND_MS
    return {
        "appendfsync": mode,
        "seed": seed,
        "torn": torn,
        "acked": len(acked),
        "acked_lost": len(lost),
        "oldest_lost_ms_before_cut": max(ages, default=0.0),
        "unacked_present": len(present - set(acked)),
        "dropped_pages": cut.get("dropped_pages"),
        "torn_bytes": cut.get("torn_bytes"),
        "error": error,
        "refused_to_start": refused,
        "check_aof_fix": fixed,
        "ok": error is None and bool(cut.get("cut")) and all(a <= bound for a in ages),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="writing before the cut, up to")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--torn", action="store_true", help="tear the last unsynced write too")
    ap.add_argument("--json")
    args = ap.parse_args()
    why = fuse_unavailable() or (None if redis_server() else "redis-server is not installed")
    if why is not None:
        print(f"== Redis power loss on lossyfs: not run: {why}")
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    with tempfile.TemporaryDirectory(prefix="sf-redis-power-") as t:
        for mode in ("always", "everysec"):
            for seed in range(1, args.seeds + 1):
                r = redis_cut(Path(t), mode, args.seconds, seed, args.torn)
                print(json.dumps(r), flush=True)
                results.append(r)
    bad = [r for r in results if not r["ok"]]
    print(
        f"== Redis power loss on lossyfs: {len(results)} cuts, violations {len(bad)}; date "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""A real power loss under surefoot's SQLite journal: the journal lives on ``lossyfs`` (a
FUSE file system that keeps unsynced data in memory only), a run journals steps, the
writer is SIGKILLed at a seeded moment, the power is cut (everything not fsynced is
dropped, optionally the last write torn), the file system is mounted again, and the
acknowledged steps are counted in the journal.

    .venv/bin/python benchmarks/chaos/power_loss.py [--steps 40] [--seeds 3] [--json out]

A step is acknowledged when ``await step(i)`` returned in the workflow (its row is
committed); the writer logs it outside the mount, line-buffered, only then. Pass: with
``synchronous=FULL`` no acknowledged step is lost, torn last write or not; with
``synchronous=NORMAL`` (fsyncs the ``-wal`` only at checkpoints) the acknowledged steps
lost are exactly those since the last checkpoint, and the journal opens. Needs root,
/dev/fuse, Debian's ``fuse3`` and ``mfusepy`` (the ``chaos`` dependency group); every
process and mount it makes it removes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

WRITER = """
import sys, time
from surefoot import durable
url, n, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = open(log, "a", buffering=1)
app = durable.App(url, lease=60)

@app.step
async def step(i: int) -> int:
    return i

@app.workflow(version="1")
async def steps(n: int) -> int:
    for i in range(n):
        await step(i)
        out.write(f"ack {i} {time.monotonic():.6f}\\n")
    return n

app.start(steps, n, run_id="power").result(timeout=300)
out.write("done\\n")
"""


def fuse_unavailable() -> str | None:
    """Why lossyfs cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (mounting a FUSE file system)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian's fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: libfuse itself is missing
        return f"mfusepy cannot load: {exc} (the chaos dependency group, and libfuse3)"
    return None


class Mount:
    """``lossyfs`` serving ``backing`` at ``mnt``, in a process of its own."""

    def __init__(self, backing: Path, mnt: Path, seed: int, lie: bool = False) -> None:
        self.mnt = mnt
        self.events = mnt.parent / f"{mnt.name}.syncs"
        mnt.mkdir(parents=True, exist_ok=True)
        self.log = open(mnt.parent / f"{mnt.name}.fs.log", "w")  # noqa: SIM115
        cmd = [sys.executable, str(HERE / "lossyfs.py"), str(backing), str(mnt)]
        cmd += ["--seed", str(seed), "--events", str(self.events), *(["--lie"] if lie else [])]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.monotonic() + 15
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                err = (mnt.parent / f"{mnt.name}.fs.log").read_text()[-400:]
                raise RuntimeError(f"lossyfs did not mount {mnt}: {err}")
            time.sleep(0.05)

    def cut(self, torn: bool) -> dict[str, Any]:
        """The power goes: unsynced data dropped (the last write torn if asked)."""
        try:
            os.stat(self.mnt / (".power-cut-torn" if torn else ".power-cut"))
        except FileNotFoundError:
            pass
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        return json.loads(line) if line.strip() else {"cut": False}

    def close(self) -> None:
        # Always (after a cut even stat fails, so ismount says no): lazily, so a process
        # still holding a file there cannot keep it mounted.
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)], check=False, capture_output=True)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # ours: started above
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def journal_steps(db: Path, witness: bool = False) -> dict[str, Any]:
    """The done steps of run ``power`` in the journal ``db`` (values), or the error. A file
    that is a sound SQLite database without the journal's tables (their creation was not
    synced either) holds no step. ``witness``: opened with ``?witness=on`` (a refusal is
    the error)."""
    import sqlite3

    from surefoot import durable

    try:
        with sqlite3.connect(db) as c:
            check = c.execute("PRAGMA integrity_check").fetchone()[0]
            tables = c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.Error as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    if check != "ok":
        return {"error": f"integrity_check: {check}"[:200]}
    if tables == 0:
        return {"done": [], "schema_lost": True}
    try:
        app = durable.App(f"sqlite:///{db}" + ("?witness=on" if witness else ""))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        rows = app.existing_journal().steps("power")
        done = sorted(
            int(json.loads(r.result)) if r.result is not None else -1
            for r in rows
            if r.status == "done" and r.name.endswith("step")
        )
        return {"done": done}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    finally:
        app.close()


def power_cut(
    tmp: Path,
    mode: str,
    steps: int,
    seed: int,
    torn: bool,
    *,
    after: int | None = None,
    lie: bool = False,
    witness: bool = False,
) -> dict[str, Any]:
    """One run: journal steps on lossyfs, kill, cut the power, mount again, count. The cut
    comes after a seeded number of acknowledged steps, from ``after`` (default a third of
    ``steps``) up to ``steps``; ``lie``: the disk's fsync syncs nothing (a planted fault);
    ``witness``: the writer and the reader use ``?witness=on`` (its file on lossyfs too),
    and a refusal after the cut is a false alarm (a violation)."""
    case = tmp / f"{mode}-{seed}-{steps}-{'torn' if torn else 'clean'}{'-lie' if lie else ''}"
    case = case.with_name(case.name + ("-witness" if witness else ""))
    backing, log = case / "backing", case / "acks.log"
    backing.mkdir(parents=True)
    mount = Mount(backing, case / "mnt", seed, lie)
    try:
        url = f"sqlite:///{mount.mnt / 'journal.db'}?synchronous={mode}"
        url += "&witness=on" if witness else ""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        with open(case / "writer.err", "w") as err:  # the child has its own copy
            p = subprocess.Popen(
                [sys.executable, "-c", WRITER, url, str(steps), str(log)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        want = random.Random(seed).randrange(steps // 3 if after is None else after, steps)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and p.poll() is None:
            if log.exists() and log.read_text().count("ack ") >= want:
                break
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL)  # ours, by its pid
        p.wait()
        cut = mount.cut(torn)
    finally:
        mount.close()
    acks = [x.split() for x in log.read_text().splitlines() if x.startswith("ack ")]
    acked = [int(a[1]) for a in acks]
    # The last sync of the -wal, from lossyfs's events: a step acknowledged before it began
    # is in the synced -wal (SQLite's documented NORMAL guarantee: durable at checkpoints).
    syncs = [x.split() for x in mount.events.read_text().splitlines()]
    wal_syncs = [float(x[1]) for x in syncs if x[3].endswith("-wal")]
    before_sync = [int(a[1]) for a in acks if wal_syncs and float(a[2]) < max(wal_syncs)]
    again = Mount(backing, case / "mnt2", seed)  # the power is back
    try:
        found = journal_steps(again.mnt / "journal.db", witness)
    finally:
        again.close()
    done = found.get("done", [])
    lost = [i for i in acked if i not in done]
    return {
        "mode": mode,
        "seed": seed,
        "torn": torn,
        "lying_fsync": lie,
        "witness": witness,
        "acked": len(acked),
        "acked_lost": len(lost),
        "present": len(done),
        "unacked_present": len([i for i in done if i not in acked]),
        "acked_before_last_wal_sync": len(before_sync),
        "schema_lost": found.get("schema_lost", False),
        "error": found.get("error"),
        "dropped_pages": cut.get("dropped_pages"),
        "torn_bytes": cut.get("torn_bytes"),
        "syncs": cut.get("syncs"),
        "cut": cut.get("cut", False),
        # FULL: nothing acknowledged lost; NORMAL: the file is sound, the loss is a suffix
        # (what came after the last -wal sync), never a hole, never a step synced before.
        "ok": bool(cut.get("cut"))
        and found.get("error") is None
        and (
            not lost
            if mode == "FULL"
            else lost == acked[len(acked) - len(lost) :] and not set(lost) & set(before_sync)
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--long-steps",
        type=int,
        default=1500,
        help="one more NORMAL run this long, cut after 1,000 steps: past its first checkpoint",
    )
    ap.add_argument(
        "--plant",
        choices=["lying-fsync"],
        help="a disk whose fsync syncs nothing: FULL must then be flagged (exit 1)",
    )
    ap.add_argument(
        "--witness",
        action="store_true",
        help="synchronous=FULL only, writer and reader with ?witness=on: a refusal after a "
        "cut is a false alarm (exit 1)",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    why = fuse_unavailable()
    if why is not None:
        print(f"== power loss on lossyfs: not run: {why}")
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    with tempfile.TemporaryDirectory(prefix="sf-power-") as t:
        cases: list[tuple[str, int, int, bool, int | None]] = [
            (mode, args.steps, seed, torn, None)
            for mode in ("FULL", "NORMAL")
            for torn in (False, True)
            for seed in range(1, args.seeds + 1)
        ]
        if args.long_steps:
            cases.append(("NORMAL", args.long_steps, 1, False, min(1000, args.long_steps - 1)))
        if args.plant:
            cases = [("FULL", args.steps, seed, False, None) for seed in range(1, args.seeds + 1)]
        if args.witness:  # NORMAL refuses the witness (it does not sync each commit)
            cases = [c for c in cases if c[0] == "FULL"]
        for mode, steps, seed, torn, after in cases:
            r = power_cut(
                Path(t),
                mode,
                steps,
                seed,
                torn,
                after=after,
                lie=bool(args.plant),
                witness=args.witness,
            )
            print(json.dumps(r), flush=True)
            results.append(r)
    bad = [r for r in results if not r["ok"]]
    for mode in ("FULL", "NORMAL"):
        rs = [r for r in results if r["mode"] == mode]
        print(
            f"   synchronous={mode}: {len(rs)} cuts, acknowledged "
            f"{sum(r['acked'] for r in rs)}, acknowledged lost {sum(r['acked_lost'] for r in rs)}"
            + (
                f", refused {sum(str(r['error']).startswith('CorruptionError') for r in rs)}"
                if args.witness
                else ""
            )
        )
    print(
        f"== power loss on lossyfs (SQLite journal): {len(results)} cuts, violations "
        f"{len(bad)}; date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

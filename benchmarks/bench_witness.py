"""What ``?witness=on`` costs on SQLite (issue 27, section 4): per journalled durable step
and per versioned Store write, witness on against off, and both against a bare SQLite
commit (WAL, ``synchronous=FULL``) alone and followed by one ``pwrite`` + ``fdatasync`` of a
sidecar file (the least a second durable record costs).

    .venv/bin/python benchmarks/bench_witness.py [--rounds 5] [--dir /path/on/the/disk]

One process, one folder, every file and connection kept across the rounds and written past
SQLite's first checkpoint before round 1 (a growing ``-wal`` costs more per commit, see
``bench_durable.py``). Each round runs every case ``--pairs`` times, 100 operations each, in
a rotating order, so drift on a noisy machine hits all alike; the ratios are medians of the
per-round ratios. ``db``, ``db+counter``, ``db+witness``: one-statement commits through
``SQLiteDB`` without the witness, with its counter row only, and with it whole: where its
cost goes. Also printed: the witness's writes per witnessed operation (1.0: each
commit synced its own; less: another commit's witness covered it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_durable import _FLOOR, SETTLE_FRAMES, STEPS, Kept, floor, wal_frames
from surefoot.statebus import Store
from surefoot.storage.sqlite import SQLiteDB


class KeptStore:
    """One Store on its own file, kept and settled past its first checkpoint."""

    def __init__(self, d: Path, name: str, query: str = "") -> None:
        self.path = d / f"{name}.db"
        self.store = Store(f"sqlite:///{self.path}{query}")
        self.db: Any = self.store.state.db  # type: ignore[attr-defined]
        self.n = 0
        for _ in range(50):
            if wal_frames(self.path) >= SETTLE_FRAMES:
                break
            self.run()
        self.run()

    def run(self) -> tuple[float, float]:
        """100 versioned writes over 50 keys: (seconds, CPU seconds)."""
        t0, p0 = time.perf_counter(), time.process_time()
        for _ in range(STEPS):
            self.store.write(f"k{self.n % 50}", self.n)
            self.n += 1
        return time.perf_counter() - t0, time.process_time() - p0


class KeptDB:
    """One-statement commits through ``SQLiteDB.write_one`` (the durable step's path) on a
    file of its own: ``witness`` off, on, or ``counter`` (on, its file's write and sync left
    out: what the counter row alone costs)."""

    def __init__(self, d: Path, name: str, witness: str) -> None:
        self.db = SQLiteDB(str(d / f"{name}.db"), witness="off" if witness == "off" else "on")
        if witness == "counter":
            self.db._witness.record = lambda count: None  # type: ignore[method-assign,union-attr]
        self.db.migrate("t", ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"])
        for _ in range(12):  # settled: past the first checkpoint
            self.run()

    def run(self) -> tuple[float, float]:
        t0, p0 = time.perf_counter(), time.process_time()
        for i in range(STEPS):
            self.db.write_one("INSERT INTO t(v) VALUES (?)", (f"value {i}",))
        return time.perf_counter() - t0, time.process_time() - p0


class SyncedSidecar:
    """The floor's commit followed by one 16-byte ``pwrite`` and ``fdatasync`` of a file of
    its own: a second durable record at its least."""

    def __init__(self, d: Path) -> None:
        self.fd = os.open(d / "floor.db-sidecar", os.O_RDWR | os.O_CREAT, 0o600)
        self.n = 0

    def run(self) -> tuple[float, float]:
        c = _FLOOR["kept"]
        t0, p0 = time.perf_counter(), time.process_time()
        for i in range(STEPS):
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO t(v) VALUES (?)", (f"value {i}",))
            c.execute("COMMIT")
            self.n += 1
            os.pwrite(self.fd, self.n.to_bytes(16, "little"), 0)
            os.fdatasync(self.fd)
        return time.perf_counter() - t0, time.process_time() - p0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=4, help="runs of each case per round")
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    a = ap.parse_args()
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    d = Path(tempfile.mkdtemp(prefix="bench-witness-", dir=a.dir))
    names = ("floor", "floor+sync", "db", "db+counter", "db+witness", "step", "step+witness")
    names += ("write", "write+witness")
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    per_op: dict[str, float] = {}
    try:
        floor(d, SETTLE_FRAMES + 100)  # opens, keeps and settles the floor's file
        sidecar = SyncedSidecar(d)
        off, on = Kept(d, "sf-off"), Kept(d, "sf-on", "?witness=on")
        w_off, w_on = KeptStore(d, "st-off"), KeptStore(d, "st-on", "?witness=on")
        dbs = {k: KeptDB(d, f"db-{k}", k) for k in ("off", "counter", "on")}

        def durable_run(kept: Kept) -> Callable[[], tuple[float, float]]:
            def go() -> tuple[float, float]:
                kept.runs += 1
                t0, p0 = time.perf_counter(), time.process_time()
                kept.app.start(kept.flow, STEPS, run_id=f"r{kept.runs}").result(timeout=120)
                return time.perf_counter() - t0, time.process_time() - p0

            return go

        def floor_run() -> tuple[float, float]:
            t0, p0 = time.perf_counter(), time.process_time()
            floor(d, STEPS)
            return time.perf_counter() - t0, time.process_time() - p0

        cases: dict[str, Callable[[], tuple[float, float]]] = {
            "floor": floor_run,
            "floor+sync": sidecar.run,
            "db": dbs["off"].run,
            "db+counter": dbs["counter"].run,
            "db+witness": dbs["on"].run,
            "step": durable_run(off),
            "step+witness": durable_run(on),
            "write": w_off.run,
            "write+witness": w_on.run,
        }
        witness_db: Any = on.app.journal.wrapped.db  # type: ignore[attr-defined]
        writes0 = (witness_db._witness.writes, w_on.db._witness.writes)
        ops0 = (on.runs, w_on.n)
        for r in range(a.rounds):
            w = dict.fromkeys(names, 0.0)
            c = dict.fromkeys(names, 0.0)
            for k in range(a.pairs):
                order = list(names[k % len(names) :] + names[: k % len(names)])
                for name in order:
                    dw, dc = cases[name]()
                    w[name] += dw
                    c[name] += dc
            n = a.pairs * STEPS
            for name in names:
                wall[name].append(1e6 * w[name] / n)
                cpu[name].append(1e6 * c[name] / n)
            print(
                f"round {r + 1}: "
                + ", ".join(f"{name} {wall[name][-1]:,.0f} µs" for name in names),
                flush=True,
            )
        steps_on = (on.runs - ops0[0]) * STEPS
        per_op["witness writes per step"] = (witness_db._witness.writes - writes0[0]) / steps_on
        per_op["witness writes per Store write"] = (w_on.db._witness.writes - writes0[1]) / (
            w_on.n - ops0[1]
        )
        off.app.close()
        on.app.close()
        w_off.store.close()
        w_on.store.close()
        os.close(sidecar.fd)
        for kept_db in dbs.values():
            kept_db.db.close()
    finally:
        for conn in _FLOOR.values():
            conn.close()
        shutil.rmtree(d, ignore_errors=True)

    def ratio(x: str, y: str, of: dict[str, list[float]]) -> float:
        return statistics.median(p / q for p, q in zip(of[x], of[y], strict=True))

    print(
        f"\nbench_witness.py, {a.rounds} rounds x {a.pairs} x {STEPS} operations per case, "
        f"started {started}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, ended "
        f"{time.strftime('%H:%M:%S UTC', time.gmtime())} load {os.getloadavg()[0]:.2f}"
    )
    print(f"  {'case':16} {'µs/op (median)':>15} {'CPU µs/op':>10}")
    for name in names:
        print(
            f"  {name:16} {statistics.median(wall[name]):>15,.0f} "
            f"{statistics.median(cpu[name]):>10,.0f}"
        )
    print("  ratios (median of per-round ratios), wall / CPU:")
    for x, y in (
        ("floor+sync", "floor"),
        ("db+counter", "db"),
        ("db+witness", "db"),
        ("step", "floor"),
        ("step+witness", "floor"),
        ("step+witness", "step"),
        ("write+witness", "write"),
        ("step+witness", "floor+sync"),
    ):
        print(f"    {x + ' / ' + y:30} {ratio(x, y, wall):6.2f}x / {ratio(x, y, cpu):.2f}x")
    for k, v in per_op.items():
        print(f"  {k}: {v:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

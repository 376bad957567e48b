"""The ``-wal`` check's cost per frame: frame by frame in Python (before issue 27's section 4
was sped up) against the batched checksums, on the same bytes, in one run (not asserted in
any test; tests count batches instead).

Writes a SQLite file in WAL mode whose ``-wal`` keeps ``--frames`` frames (a connection holds
it open, checkpoints are off), copies the ``-wal``, and times ``_Wal(data).damage()`` both
ways on it: intact, and with one bit flipped in an early frame (the verdict is then damage).
Prints CPU microseconds per frame (the fastest of ``--repeats`` and their median), the ratio,
and checks that both ways give the same verdict.

    .venv/bin/python benchmarks/bench_walcheck.py [--frames 1041 2979] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from surefoot.storage.sqlite._walcheck import _Wal


def make_wal(folder: Path, frames: int, page: int, seed: int) -> bytes:
    """The bytes of a ``-wal`` of about ``frames`` frames of ``page`` bytes."""
    db = folder / f"w{frames}-{page}.db"
    keep = sqlite3.connect(db)
    keep.execute(f"PRAGMA page_size={page}")
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
    keep.commit()
    keep.execute("SELECT count(*) FROM t").fetchall()
    w = sqlite3.connect(db)
    w.execute("PRAGMA wal_autocheckpoint=0")
    rnd = random.Random(seed)
    wal = Path(f"{db}-wal")
    k = 0
    while wal.stat().st_size < 32 + frames * (24 + page):
        w.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (k % 500, rnd.randbytes(page // 2)))
        w.commit()
        k += 1
    data = wal.read_bytes()[: 32 + frames * (24 + page)]
    w.close()
    keep.close()
    return data


def timed(data: bytes, repeats: int) -> tuple[list[float], list[float], Any, Any]:
    """CPU seconds of each way, alternated ``repeats`` times, and their verdicts (CPU time:
    the machine is shared, so waiting for a core is left out)."""
    old, new, v_old, v_new = [], [], None, None
    for _ in range(repeats):
        t = time.process_time()
        v_old = _Wal(data, batch=False).damage()
        old.append(time.process_time() - t)
        t = time.process_time()
        v_new = _Wal(data).damage()
        new.append(time.process_time() - t)
    return old, new, v_old, v_new


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[1041, 2979])
    ap.add_argument("--page-size", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-walcheck-"))
    rows = []
    try:
        for frames in args.frames:
            intact = make_wal(folder, frames, args.page_size, args.seed)
            n = (len(intact) - 32) // (24 + args.page_size)
            damaged = bytearray(intact)
            damaged[32 + 2 * (24 + args.page_size) + 100] ^= 0x04  # frame 3's page
            for name, data in (("intact", intact), ("damaged", bytes(damaged))):
                old, new, v_old, v_new = timed(data, args.repeats)
                row = {
                    "wal": name,
                    "frames": n,
                    "old_us_per_frame": min(old) / n * 1e6,
                    "old_median_us_per_frame": statistics.median(old) / n * 1e6,
                    "new_us_per_frame": min(new) / n * 1e6,
                    "new_median_us_per_frame": statistics.median(new) / n * 1e6,
                    "ratio": min(old) / min(new),
                    "ratio_median": statistics.median(old) / statistics.median(new),
                    "verdict": v_new.describe() if v_new else None,
                    "same_verdict": v_old == v_new,
                }
                rows.append(row)
                print(
                    f"{name:8} {n:5} frames: frame by frame "
                    f"{row['old_us_per_frame']:7.1f} µs/frame "
                    f"(median {row['old_median_us_per_frame']:.1f}), batched "
                    f"{row['new_us_per_frame']:6.1f} µs/frame (median "
                    f"{row['new_median_us_per_frame']:.1f}), ratio {row['ratio']:.1f}x "
                    f"(medians {row['ratio_median']:.1f}x), same verdict: {row['same_verdict']}"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"== {stamp}, load average {os.getloadavg()[0]:.2f}, page size {args.page_size}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["same_verdict"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

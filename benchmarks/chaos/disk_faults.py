"""Disks that fail, on SQLite: an fsync / fdatasync / pwrite that returns EIO at its Nth call
(``strace -e inject``), a full disk (ENOSPC on a small tmpfs this script mounts and
unmounts), corruption of the database and ``-wal`` files (bit flips, truncation, as Jepsen's
NATS nemesis), and the price of ``synchronous=NORMAL`` beside FULL.

    .venv/bin/python benchmarks/chaos/disk_faults.py [--writes 60] [--json report.json]

Each fault runs a child process that writes ``k{i} = i`` through a ``Store`` and reports
each write only after ``write`` returned (``ack``) or raised (``err``). Pass: no write is
acknowledged that is not in the file afterwards, an I/O error is an error (never a
success), and the store takes writes again after it. Needs root for strace's injection and
the tmpfs mount; every process and mount it makes it removes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WRITER = """
import sys
from surefoot.statebus import Store
url, n = sys.argv[1], int(sys.argv[2])
offset = int(sys.argv[4]) if len(sys.argv) > 4 else 0
out = open(sys.argv[3], "a", buffering=1)
try:
    store = Store(url)
except Exception as exc:
    out.write(f"err -1 {type(exc).__name__}: {' '.join(str(exc).split())[:160]}\\n")
    sys.exit(0)
for i in range(n):
    try:
        store.write(f"k{i}", i + offset)
        out.write(f"ack {i}\\n")
    except Exception as exc:
        out.write(f"err {i} {type(exc).__name__}: {' '.join(str(exc).split())[:160]}\\n")
out.write("done\\n")
"""


def writer(
    url: str, n: int, log: Path, prefix: list[str] | None = None, offset: int = 0
) -> dict[str, Any]:
    """Run the writer (under ``prefix``, e.g. strace) and read what it reported."""
    cmd = [*(prefix or []), sys.executable, "-c", WRITER, url, str(n), str(log), str(offset)]
    subprocess.run(cmd, timeout=120, check=False, capture_output=True)
    acks, errs, done = [], [], False
    for line in log.read_text().splitlines() if log.exists() else []:
        if line.startswith("ack "):
            acks.append(int(line.split()[1]))
        elif line.startswith("err "):
            errs.append(line)
        elif line == "done":
            done = True
    return {"acked": acks, "errors": errs, "finished": done}


def options(check: str = "off", witness: bool = False) -> str:
    """The URL's query for ``?check=`` and ``?witness=on`` (empty for the defaults)."""
    opts = ([f"check={check}"] if check != "off" else []) + (["witness=on"] if witness else [])
    return "?" + "&".join(opts) if opts else ""


def present(db: Path, check: str = "off", witness: bool = False) -> dict[str, Any]:
    """What a fresh reader finds in ``db`` (through surefoot, opening it with
    ``?check=check``, and ``?witness=on`` if ``witness``), or the error it gets."""
    from surefoot.statebus import Store

    try:
        store = Store(f"sqlite:///{db}{options(check, witness)}")
        try:
            return {k: e.value for k, e in store.snapshot().items()}
        finally:
            store.close()
    except Exception as exc:
        return {"__error__": f"{type(exc).__name__}: {exc}"[:200]}


def eio(tmp: Path, syscalls: str, when: int, n: int) -> dict[str, Any]:
    """EIO from ``syscalls`` at their ``when``-th call in the writer."""
    db = tmp / f"eio-{syscalls.replace(',', '-')}-{when}.db"
    log = db.with_suffix(".log")
    strace = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscalls}"]
    strace += ["-e", f"inject={syscalls}:error=EIO:when={when}"]
    got = writer(f"sqlite:///{db}", n, log, strace)
    data = present(db)
    acked_missing = [i for i in got["acked"] if data.get(f"k{i}") != i]
    failed = [int(e.split()[1]) for e in got["errors"]]
    after = [i for i in got["acked"] if failed and i > max(failed)]
    again = writer(f"sqlite:///{db}", 3, db.with_suffix(".again"))  # no fault now
    surfaced = all("StoreUnavailableError" in e or "StoreError" in e for e in got["errors"])
    return {
        "fault": f"EIO on {syscalls} call {when}",
        "acked": len(got["acked"]),
        "errors": got["errors"][:1],
        "error_count": len(failed),
        "at_open": -1 in failed,
        "acked_missing": acked_missing,
        "failed_but_present": [i for i in failed if f"k{i}" in data],
        "writes_after_error_same_process": len(after),
        "writes_after_restart": len(again["acked"]),
        "ok": not acked_missing
        and len(failed) >= 1
        and surfaced
        and len(again["acked"]) == 3
        and (-1 in failed or len(after) >= 1),
    }


def enospc(tmp: Path, n: int) -> dict[str, Any]:
    """A full disk: a 1 MiB tmpfs mounted here, filled, then given room again."""
    mnt = tmp / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        db, log = mnt / "full.db", tmp / "full.log"
        filler = mnt / "filler"
        # leave ~224 KiB: enough to create the database, not for all the writes
        free = shutil.disk_usage(mnt).free
        filler.write_bytes(b"\0" * max(0, free - 224 * 1024))
        big = "x" * 4000
        src = WRITER.replace(
            'store.write(f"k{i}", i + offset)', f'store.write(f"k{{i}}", [i, {big!r}])'
        )
        cmd = [sys.executable, "-c", src, f"sqlite:///{db}", str(n), str(log)]
        subprocess.run(cmd, timeout=120, check=False, capture_output=True)
        lines = log.read_text().splitlines()
        acked = [int(x.split()[1]) for x in lines if x.startswith("ack ")]
        errors = [x for x in lines if x.startswith("err ")]
        data = present(db)
        filler.unlink()  # room again: the store must take writes
        again = writer(f"sqlite:///{db}", 3, tmp / "again.log")
        missing = [i for i in acked if data.get(f"k{i}", [None])[0] != i]
        return {
            "fault": "ENOSPC (1 MiB tmpfs)",
            "acked": len(acked),
            "error_count": len(errors),
            "errors": errors[:1],
            "acked_missing": missing,
            "writes_after_room": len(again["acked"]),
            "ok": not missing and len(errors) >= 1 and len(again["acked"]) == 3,
        }
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def flip(path: Path, rnd: random.Random, flips: int) -> list[tuple[int, int]]:
    """Flip ``flips`` random bits of the file; the (offset, bit) of each."""
    data = bytearray(path.read_bytes())
    done = []
    for _ in range(flips):
        i = rnd.randrange(len(data))
        bit = rnd.randrange(8)
        data[i] ^= 1 << bit
        done.append((i, bit))
    path.write_bytes(bytes(data))
    return done


def where_in(db: Path, flips: list[tuple[int, int]]) -> list[str]:
    """Where each flipped (offset, bit) of the database file ``db`` (undamaged) lies: its
    page, the b-tree that page belongs to (SQLite's ``dbstat``; "free" if none) and the
    offset in the page."""
    c = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        size = int(c.execute("PRAGMA page_size").fetchone()[0])
        owner = {
            int(p): f"{n} ({t})"
            for n, p, t in c.execute("SELECT name, pageno, pagetype FROM dbstat")
        }
    finally:
        c.close()
    out = []
    for i, b in flips:
        page = i // size + 1
        out.append(f"byte {i} bit {b}: page {page}, {owner.get(page, 'free')}, offset {i % size}")
    return out


KINDS = ("db-bitflip", "db-truncate", "wal-bitflip", "wal-truncate")


def corruption(
    tmp: Path,
    n: int,
    trials: int,
    seed: int,
    check: str = "off",
    kinds: tuple[str, ...] = KINDS,
    witness: bool = False,
    where: bool = False,
) -> dict[str, Any]:
    """Copies of a database (and its -wal) corrupted; what does a reader get?

    The file holds ``k{i} = i`` (checkpointed into the database) and then ``k{i} = 1000 +
    i`` (only in the ``-wal``). Each trial is counted once: ``refused``: opening or reading
    raised ``CorruptionError`` from surefoot's checks (a row's checksum, the ``-wal``'s
    frames, ``?check=``); ``sqlite_refused``: ``CorruptionError`` for SQLite's own finding
    ("database disk image is malformed"); ``other_error``: any other error; ``same``:
    exactly the data written (the damage hit unused bytes); ``lost``: no error, no value
    that was never written, but acknowledged writes missing or older versions served
    (transactions silently dropped); ``wrong``: no error and a value that was never written
    served.
    ``check``: the reader opens the file with ``?check=`` (off, quick, full); ``witness``:
    the writers and the reader use ``?witness=on`` (its ``-witness`` file is copied with
    the pair, undamaged). ``where``: list each database bit-flip trial that did not read
    the same data, with where its bits landed (:func:`where_in`) and the keys it lost."""
    src = tmp / "good.db"
    url = f"sqlite:///{src}" + ("?witness=on" if witness else "")
    writer(url, n, tmp / "good.log")
    # The same writes again while this process holds the file open, so they stay in the
    # -wal (the last connection to close would checkpoint it into the database).
    keep = sqlite3.connect(src)
    keep.execute("SELECT count(*) FROM sqlite_master").fetchall()
    writer(url, n, tmp / "good2.log", offset=1000)
    pristine = tmp / "pristine"
    pristine.mkdir()
    for suffix in SUFFIXES:
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{pristine / 'x.db'}{suffix}")
    keep.close()
    truth = present(copy_pair(pristine, tmp / "truth"), witness=witness)
    written = {f"k{i}": {i, 1000 + i} for i in range(n)}
    rnd = random.Random(seed)
    out: dict[str, dict[str, int]] = {}
    by_witness = dict.fromkeys(kinds, 0)
    located: list[dict[str, Any]] = []
    for kind in kinds:
        tally = dict.fromkeys(
            ("refused", "sqlite_refused", "other_error", "same", "lost", "wrong"), 0
        )
        for t in range(trials):
            db = copy_pair(pristine, tmp / f"c-{kind}-{t}")
            victim = db if kind.startswith("db") else Path(str(db) + "-wal")
            if not victim.exists():
                continue
            flips: list[tuple[int, int]] = []
            if kind.endswith("bitflip"):
                flips = flip(victim, rnd, 8)
            else:
                size = victim.stat().st_size
                with open(victim, "r+b") as f:
                    f.truncate(rnd.randrange(size // 4, size))
            got = present(db, check, witness)
            outcome = classify(got, truth, written)
            # the refusals the witness made (no other check's message says "witness")
            by_witness[kind] += "witness" in got.get("__error__", "")
            tally[outcome] += 1
            if where and kind == "db-bitflip" and outcome != "same":
                located.append(
                    {
                        "trial": t,
                        "outcome": outcome,
                        "error": got.get("__error__", "")[:120],
                        "missing": sorted(set(truth) - set(got) - {"__error__"}),
                        "flips": where_in(pristine / "x.db", flips),
                    }
                )
        out[kind] = tally
    # What surefoot claims (docs/reliability.md, section 4): no trial serves a value that
    # was never written, and no bit-flipped -wal is read with its last transactions
    # silently dropped. Truncation (indistinguishable from a power cut before a sync) and
    # a damaged index without ?check=full are not claimed; their counts are reported. With
    # the witness, a cut -wal is claimed too: refused, never read short; with the witness and
    # ?check=full, no trial of any kind loses data silently.
    flipped = out.get("wal-bitflip", {})
    ok = all(t["wrong"] == 0 for t in out.values()) and flipped.get("lost", 0) == 0
    if witness:
        ok = ok and out.get("wal-truncate", {}).get("lost", 0) == 0
    if witness and check == "full":  # both options: every kind of damage refused or harmless
        ok = ok and all(t["lost"] == 0 for t in out.values())
    res = {
        "fault": "corruption",
        "check": check,
        "witness": witness,
        "trials": trials,
        "by_kind": out,
        "refused_by_witness": by_witness,
        "ok": ok,
    }
    return res | ({"where": located} if where else {})


def classify(got: dict[str, Any], truth: dict[str, Any], written: dict[str, set[Any]]) -> str:
    """One corruption trial's outcome (see :func:`corruption`)."""
    if "__error__" in got:
        error = got["__error__"]
        if not error.startswith("CorruptionError"):
            return "other_error"
        return "sqlite_refused" if error.startswith("CorruptionError: SQLite found") else "refused"
    if got == truth:
        return "same"
    if all(k in written and _hashable(v) in written[k] for k, v in got.items()):
        return "lost"
    return "wrong"


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


SUFFIXES = ("", "-wal", "-witness")


def copy_pair(src_dir: Path, dest: Path) -> Path:
    """Copy ``x.db`` and ``x.db-wal`` (and ``x.db-witness`` if there is one) from
    ``src_dir`` into the new folder ``dest``."""
    dest.mkdir()
    for suffix in SUFFIXES:
        if suffix != "-witness" or Path(f"{src_dir / 'x.db'}{suffix}").exists():
            shutil.copy(f"{src_dir / 'x.db'}{suffix}", f"{dest / 'x.db'}{suffix}")
    return dest / "x.db"


def synced_sizes(trace: Path) -> dict[str, int]:
    """From an strace log of openat / pwrite64 / write / fsync / fdatasync: how many bytes
    of each file had been written before its last sync (the rest a power loss may drop)."""
    import re

    names: dict[tuple[str, int], str] = {}
    written: dict[str, int] = {}
    synced: dict[str, int] = {}
    for line in trace.read_text(errors="replace").splitlines():
        pid, _, call = line.partition(" ")
        call = call.lstrip()  # strace pads the pid to five columns
        if m := re.match(r'openat\([^,]+, "([^"]+)".*\)\s*= (\d+)$', call):
            names[(pid, int(m[2]))] = m[1]
            written.setdefault(m[1], 0)
        elif m := re.match(r"pwrite64\((\d+), .*, (\d+), (\d+)\)\s*= (\d+)$", call):
            name = names.get((pid, int(m[1])))
            if name is not None:
                written[name] = max(written[name], int(m[3]) + int(m[4]))
        elif m := re.match(r"f(?:data)?sync\((\d+)\)\s*= 0$", call):
            name = names.get((pid, int(m[1])))
            if name is not None:
                synced[name] = written[name]
    return {n: synced.get(n, 0) for n in written}


def power_loss(tmp: Path, mode: str, n: int, seed: int) -> dict[str, Any]:
    """A power cut emulated: the writer (``synchronous=mode``) is SIGKILLed at a seeded
    moment; then, on a copy, the ``-wal`` keeps only the bytes written before its last
    fsync/fdatasync (as strace saw them), as if the cache had been lost with the power.
    Weaker than a file system that drops unsynced writes (LazyFS): unsynced bytes are
    dropped from the end only, never reordered, and the database file (written by
    checkpoints, which sync) is kept whole."""
    db = tmp / f"power-{mode}-{seed}.db"
    log, trace = db.with_suffix(".log"), db.with_suffix(".strace")
    cmd = ["strace", "-f", "-qq", "-s", "0", "-o", str(trace)]
    cmd += ["-e", "trace=openat,pwrite64,fsync,fdatasync"]
    cmd += [sys.executable, "-c", WRITER, f"sqlite:///{db}?synchronous={mode}", str(n), str(log)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rnd = random.Random(seed)
    deadline = time.monotonic() + 60
    want = rnd.randrange(n // 3, n)
    while time.monotonic() < deadline and p.poll() is None:  # cut after ~want acks
        if log.exists() and log.read_text().count("ack ") >= want:
            break
        time.sleep(0.01)
    # Kill the writer, not strace: strace then writes out the whole trace and exits (a
    # killed strace would lose the end of its log, and with it the last syncs).
    children = Path(f"/proc/{p.pid}/task/{p.pid}/children")
    kids = children.read_text().split() if children.exists() else []
    for kid in kids:
        os.kill(int(kid), signal.SIGKILL)
    if not kids:
        p.send_signal(signal.SIGKILL)
    p.wait()
    acked = [int(x.split()[1]) for x in log.read_text().splitlines() if x.startswith("ack ")]
    sizes = synced_sizes(trace)
    cut = tmp / f"after-power-{mode}-{seed}"
    cut.mkdir()
    copy = cut / "x.db"
    shutil.copy(db, copy)
    wal = Path(f"{db}-wal")
    dropped = 0
    if wal.exists():
        keep = sizes.get(str(wal), 0)
        data = wal.read_bytes()
        dropped = max(0, len(data) - keep)
        Path(f"{copy}-wal").write_bytes(data[:keep])
    data = present(copy)
    lost = [i for i in acked if data.get(f"k{i}") != i]
    return {
        "fault": f"power loss, synchronous={mode}",
        "acked": len(acked),
        "acked_lost": len(lost),
        "wal_bytes_dropped": dropped,
        "error": data.get("__error__"),
        "ok": not lost if mode == "FULL" else "__error__" not in data,
    }


def sync_speed(tmp: Path, n: int) -> dict[str, Any]:
    """Versioned writes per second with synchronous=FULL and NORMAL, interleaved rounds."""
    from surefoot.statebus import Store

    res: dict[str, list[float]] = {"FULL": [], "NORMAL": []}
    for r in range(3):
        for mode in ("FULL", "NORMAL"):
            store = Store(f"sqlite:///{tmp / f'speed-{mode}-{r}.db'}?synchronous={mode}")
            store.write("warm", 0)
            t = time.perf_counter()
            for i in range(n):
                store.write(f"k{i % 50}", i)
            res[mode].append(n / (time.perf_counter() - t))
            store.close()
    return {m: sorted(v)[1] for m, v in res.items()} | {"writes_per_round": n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=60)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--speed-writes", type=int, default=500)
    ap.add_argument("--only", choices=["eio", "enospc", "corruption", "power", "speed"])
    ap.add_argument(
        "--check",
        choices=["off", "quick", "full"],
        default="off",
        help="the corruption campaign's reader opens files with ?check= (default off)",
    )
    ap.add_argument(
        "--witness",
        action="store_true",
        help="the corruption campaign's writers and reader use ?witness=on",
    )
    ap.add_argument(
        "--where",
        action="store_true",
        help="corruption: where each database bit flip that changed what was read landed",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sf-disk-") as t:
        tmp = Path(t)
        if args.only in (None, "eio"):
            for syscalls, whens in (("fdatasync,fsync", (3, 17, 40)), ("pwrite64", (20, 90, 160))):
                for when in whens:
                    results.append(eio(tmp, syscalls, when, args.writes))
        if args.only in (None, "enospc"):
            results.append(enospc(tmp, args.writes))
        if args.only in (None, "corruption"):
            results.append(
                corruption(
                    tmp,
                    args.writes,
                    args.trials,
                    args.seed,
                    args.check,
                    witness=args.witness,
                    where=args.where,
                )
            )
        if args.only in (None, "power"):
            for mode in ("FULL", "NORMAL"):
                for seed in range(args.seed, args.seed + 5):
                    results.append(power_loss(tmp, mode, args.writes, seed))
        if args.only in (None, "speed"):
            results.append(
                {"fault": "none: synchronous speed", **sync_speed(tmp, args.speed_writes)}
            )
    for r in results:
        print(json.dumps(r))
    bad = [r for r in results if r.get("ok") is False]
    print(
        f"== disk faults on SQLite: {len(results)} runs, violations {len(bad)}; date "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""A FUSE pass-through file system that loses what was not synced, for the power-loss
campaign (docs/reliability.md §4). LazyFS's idea, small and in Python.

    python benchmarks/chaos/lossyfs.py BACKING MOUNTPOINT [--seed N]

Every file's data written through MOUNTPOINT is held in memory (4 KiB pages, per file)
and reaches BACKING only when that file is fsynced or fdatasynced; reads see the held
data, as a page cache would. Metadata (create, unlink, rename, mkdir, chmod) goes to
BACKING at once, as a journaling file system keeps it; only file data waits for a sync.

A power cut: ``stat MOUNTPOINT/.power-cut`` (or ``.power-cut-torn``) drops everything not
synced, and with ``-torn`` first writes a seeded prefix (whole 512-byte sectors, at least
one, fewer than all; a write of one sector or less whole) of the last unsynced write to
BACKING: torn by the cut, and landed although the unsynced writes before it did not. After
a cut every call fails with EIO; unmount with ``fusermount3 -u MOUNTPOINT`` and read BACKING
(or mount it again): it holds exactly what a disk would after the power came back. The
cut's figures go to stdout as one JSON line.

``--lie`` plants a disk whose fsync succeeds and syncs nothing (the campaign must then
flag lost steps). ``--events FILE`` appends a line per sync (when it began and ended, on
CLOCK_MONOTONIC, and the file). Needs libfuse 3 (Debian's ``fuse3``) and ``mfusepy`` (the
``chaos`` dependency group).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import mfusepy as fuse

PAGE = 4096
SECTOR = 512
CUT, CUT_TORN = "/.power-cut", "/.power-cut-torn"


@dataclass
class Held:
    """A file's data not yet synced: its size, the pages written since the last sync, and
    ``floor``: the backing file's bytes past it are gone (a truncate not yet synced)."""

    size: int
    floor: int
    pages: dict[int, bytearray] = field(default_factory=dict)


class LossyFS(fuse.Operations):
    use_ns = True

    def __init__(
        self, backing: str, seed: int = 1, events: str | None = None, lie: bool = False
    ) -> None:
        self.root = os.path.realpath(backing)
        self.lie = lie  # a disk whose fsync answers at once and keeps nothing
        self.events = open(events, "a", buffering=1) if events else None  # noqa: SIM115
        self.held: dict[str, Held] = {}
        self.last: tuple[str, int, bytes] | None = None  # the last unsynced write
        self.mutex = threading.RLock()
        self.dead = False
        self.rnd = random.Random(seed)
        self.stats = {"writes": 0, "syncs": 0, "synced_bytes": 0}

    # -- helpers -------------------------------------------------------------------------

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _alive(self) -> None:
        if self.dead:
            raise fuse.FuseOSError(errno.EIO)

    def _hold(self, path: str) -> Held:
        h = self.held.get(path)
        if h is None:
            size = os.lstat(self._full(path)).st_size
            h = self.held[path] = Held(size=size, floor=size)
        return h

    def _page(self, path: str, h: Held, n: int) -> bytearray:
        """Page ``n`` as the file now reads: held, or from BACKING below the floor."""
        got = h.pages.get(n)
        if got is not None:
            return got
        start = n * PAGE
        page = bytearray(PAGE)
        keep = max(0, min(PAGE, h.floor - start))
        if keep:
            with open(self._full(path), "rb") as f:
                f.seek(start)
                base = f.read(keep)
            page[: len(base)] = base
        return page

    # -- the power cut -------------------------------------------------------------------

    def cut(self, torn: bool) -> dict[str, Any]:
        with self.mutex:
            report: dict[str, Any] = {
                "cut": True,
                "dropped_files": len(self.held),
                "dropped_pages": sum(len(h.pages) for h in self.held.values()),
                "torn_bytes": 0,
                **self.stats,
            }
            if torn and self.last is not None:
                path, offset, data = self.last
                sectors = max(1, len(data) // SECTOR)
                keep = min(len(data), SECTOR * self.rnd.randrange(1, sectors + 1))
                if keep == len(data) and len(data) > SECTOR:
                    keep -= SECTOR  # torn: never the whole write
                if os.path.exists(self._full(path)):
                    fd = os.open(self._full(path), os.O_WRONLY)
                    try:
                        os.pwrite(fd, data[:keep], offset)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    report |= {"torn_bytes": keep, "torn_of": len(data), "torn_file": path}
            self.held.clear()
            self.last = None
            self.dead = True
            print(json.dumps(report), flush=True)
            return report

    # -- data ----------------------------------------------------------------------------

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self.mutex:
            self._alive()
            h = self.held.get(path)
            if h is None:
                return os.pread(fh, size, offset)
            end = min(offset + size, h.size)
            out = bytearray()
            pos = offset
            while pos < end:
                n, at = divmod(pos, PAGE)
                take = min(PAGE - at, end - pos)
                out += self._page(path, h, n)[at : at + take]
                pos += take
            return bytes(out)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            self._alive()
            h = self._hold(path)
            pos, src = offset, memoryview(data)
            while src:
                n, at = divmod(pos, PAGE)
                take = min(PAGE - at, len(src))
                page = self._page(path, h, n)
                page[at : at + take] = src[:take]
                h.pages[n] = page
                pos += take
                src = src[take:]
            h.size = max(h.size, offset + len(data))
            self.last = (path, offset, bytes(data))
            self.stats["writes"] += 1
            return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.mutex:
            self._alive()
            h = self._hold(path)
            if length < h.size:
                n, at = divmod(length, PAGE)
                if at:
                    page = self._page(path, h, n)
                    page[at:] = bytes(PAGE - at)
                    h.pages[n] = page
                for p in [p for p in h.pages if p * PAGE >= length]:
                    del h.pages[p]
                h.floor = min(h.floor, length)
            h.size = length
            return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            self._alive()
            began = time.monotonic()
            h = None if self.lie else self.held.pop(path, None)
            if h is not None:
                fd = os.open(self._full(path), os.O_WRONLY)
                try:
                    if h.floor < os.fstat(fd).st_size:
                        os.ftruncate(fd, h.floor)
                    for n in sorted(h.pages):
                        chunk = h.pages[n][: max(0, min(PAGE, h.size - n * PAGE))]
                        os.pwrite(fd, chunk, n * PAGE)
                        self.stats["synced_bytes"] += len(chunk)
                    os.ftruncate(fd, h.size)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if self.last is not None and self.last[0] == path:
                    self.last = None
            self.stats["syncs"] += 1
            if self.events is not None:  # when each sync began and ended (CLOCK_MONOTONIC)
                self.events.write(f"sync {began:.6f} {time.monotonic():.6f} {path}\n")
            return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._alive()
        return 0  # metadata is on BACKING already

    def flush(self, path: str, fh: int) -> int:
        self._alive()
        return 0  # close(2) is no sync

    # -- files and metadata (applied to BACKING at once) ---------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path in (CUT, CUT_TORN):
            if not self.dead:
                self.cut(torn=path == CUT_TORN)
            raise fuse.FuseOSError(errno.ENOENT)
        with self.mutex:
            self._alive()
            try:
                st = os.lstat(self._full(path))
            except OSError as exc:
                raise fuse.FuseOSError(exc.errno) from None
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size")
            attrs: dict[str, Any] = {k: getattr(st, k) for k in keys}
            attrs |= {"st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns}
            attrs["st_ctime"] = st.st_ctime_ns
            h = self.held.get(path)
            if h is not None and stat.S_ISREG(st.st_mode):
                attrs["st_size"] = h.size
            return attrs

    def open(self, path: str, flags: int) -> int:
        self._alive()
        keep = flags & ~(os.O_ACCMODE | os.O_TRUNC | os.O_APPEND)
        fd = os.open(self._full(path), keep | os.O_RDWR)
        if flags & os.O_TRUNC:
            self.truncate(path, 0)
        return fd

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        self._alive()
        with self.mutex:
            self.held.pop(path, None)
            return os.open(self._full(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            self._alive()
            os.unlink(self._full(path))
            self.held.pop(path, None)
            if self.last is not None and self.last[0] == path:
                self.last = None
            return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            self._alive()
            os.rename(self._full(old), self._full(new))
            self.held.pop(new, None)
            if old in self.held:
                self.held[new] = self.held.pop(old)
            if self.last is not None and self.last[0] == old:
                self.last = (new, *self.last[1:])
            return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        self._alive()
        return [".", "..", *os.listdir(self._full(path))]

    def mkdir(self, path: str, mode: int) -> int:
        self._alive()
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._alive()
        os.rmdir(self._full(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self._alive()
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self._alive()
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        self._alive()
        os.utime(self._full(path), ns=times)
        return 0

    def access(self, path: str, amode: int) -> int:
        self._alive()
        if not os.access(self._full(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        return {k: getattr(sv, k) for k in (*keys, "f_flag", "f_frsize", "f_namemax")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--events", help="append a line per sync here (time began, ended, file)")
    ap.add_argument("--lie", action="store_true", help="fsync succeeds and syncs nothing")
    args = ap.parse_args()
    fs = LossyFS(args.backing, args.seed, args.events, args.lie)
    # foreground, one thread (calls are serialised anyway); no kernel caching of data across
    # opens, so every read after a cut comes from BACKING (the mount is new then anyway).
    fuse.FUSE(fs, args.mountpoint, foreground=True, nothreads=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

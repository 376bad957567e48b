"""Waiting for another process's commit to a SQLite file, without polling every few ms.

``PRAGMA data_version`` tells a connection that another connection committed; reading it in
a loop every 5 ms cost a blocked reader 200 wake-ups a second and up to 5 ms of latency. On
Linux a commit also writes the file's ``-wal`` (or, without WAL, the file itself), which
inotify reports at once, but publishes itself through the ``-shm`` index in shared memory,
which inotify does not see. So :func:`wait_for_commit` sleeps on an inotify watch of the
file's folder and, once something was written there, looks at ``data_version`` every
``HOT_POLL`` seconds for up to ``HOT`` seconds, then every ``POLL`` seconds up to ``CEILING``
(a sync can outlast ``HOT``), until the commit shows. While the commits it sees are not the
one it waits for (a busy file), it looks less and less often, down to once every ``POLL``
seconds as polling did. It looks at least every ``CEILING`` seconds whatever inotify says (a
write inotify does not see, such as one made over a network file system, is found at most
that late), and where inotify is not available (another OS, or no instance left: Linux
allows 128 per user by default) it polls every ``POLL`` seconds as before.

Each thread keeps one watch per file (``SQLiteDB.file_changes``; closing an inotify instance
waits for the kernel, milliseconds). Events are never dropped unread, so a commit written
before a look but shown after it, or one between a look and the sleep after it, is an event
still queued: nothing is missed. Stdlib only (``ctypes`` for the two libc calls).
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["CEILING", "HOT", "HOT_POLL", "POLL", "FileChanges", "wait_for_commit"]

POLL = 0.005
"""Seconds between two looks at ``data_version`` where inotify is not available."""
CEILING = 0.1
"""The longest sleep on an inotify watch between two looks (a safety net, see above)."""
HOT, HOT_POLL = 0.02, 0.0005
"""After a write to the file, look every ``HOT_POLL`` seconds for ``HOT`` seconds: a commit
writes its WAL frames (the events), syncs them, then publishes itself in the ``-shm``
index through shared memory, which inotify does not see."""

_IN_MODIFY, _IN_CREATE, _IN_MOVED_TO, _IN_Q_OVERFLOW = 0x2, 0x100, 0x80, 0x4000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_libc: Any = None


def _inotify() -> Any:
    """libc with inotify, or None (not Linux, or no such symbols)."""
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(None, use_errno=True)
                lib.inotify_init1.argtypes = [ctypes.c_int]
                lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                _libc = lib
            except (OSError, AttributeError):
                pass
    return _libc or None


class FileChanges:
    """An inotify watch on the folder of one SQLite file: :meth:`wait` returns when the
    file or its ``-wal`` was written (or created, or renamed into place)."""

    def __init__(self, fd: int, names: frozenset[bytes]) -> None:
        self.fd = fd
        self.names = names
        self.fresh = True  # made just now: a commit written before it saw no event
        # closed once: by close(), or when the last reference goes (a watch let go by a
        # database closed from another thread while this one waited on it)
        self._close = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, path: str) -> FileChanges | None:
        """A watch for ``path``'s writes, or None where inotify cannot watch it."""
        lib = _inotify()
        if lib is None:
            return None
        folder, base = os.path.split(os.path.abspath(path))
        fd = lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return None
        mask = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO
        if lib.inotify_add_watch(fd, os.fsencode(folder), mask) < 0:
            os.close(fd)
            return None
        name = os.fsencode(base)
        return cls(fd, frozenset({name, name + b"-wal", name + b"-journal"}))

    def wait(self, timeout: float) -> bool:
        """Sleep until the file (or its journal) is written, at most ``timeout`` seconds;
        True if it was (events for other files in the folder are read and passed over)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return False
            if self._ours(os.read(self.fd, 65536)):
                return True

    def _ours(self, data: bytes) -> bool:
        at = 0
        while at + _EVENT.size <= len(data):
            _, mask, _, n = _EVENT.unpack_from(data, at)
            name = data[at + _EVENT.size : at + _EVENT.size + n].rstrip(b"\0")
            if name in self.names or mask & _IN_Q_OVERFLOW:  # events were lost: maybe ours
                return True
            at += _EVENT.size + n
        return False

    def close(self) -> None:
        self._close()


def wait_for_commit(
    conn: Any, changes: FileChanges | None, ready: Callable[[], bool], timeout: float
) -> bool:
    """Until ``ready()`` is true (asked at once, then after each commit another connection
    makes to the file, as ``PRAGMA data_version`` on ``conn`` tells) or ``timeout``
    seconds; whether it became true. ``changes``: this thread's watch of the file (kept
    between waits: closing an inotify instance can take milliseconds), None to poll."""
    deadline = time.monotonic() + timeout
    seen = None
    # Events queued before the first look are kept: a commit whose frames were written
    # before it but which showed only after it still wakes this wait (a few needless looks
    # for commits the look already saw is the price).
    hot_until = warm_until = 0.0
    if changes is not None and changes.fresh:  # its first wait: look closely for a while
        changes.fresh = False
        now = time.monotonic()
        hot_until, warm_until = now + HOT, now + CEILING
    gap = 0.0  # the least time between two looks: grows while the commits are others'
    while True:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != seen:
            if seen is not None:  # a commit showed, and was not this one: look less often
                gap = min(POLL, max(HOT_POLL, 2 * gap))  # (the windows stay: the events
                # read with its own may have been those of the next commit too)
            seen = version
            if ready():
                return True
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            return False
        if changes is None:
            time.sleep(min(POLL, left))
        elif now < hot_until:  # a commit is being written: see HOT
            time.sleep(min(max(HOT_POLL, gap), left))
        elif now < warm_until:  # one whose sync outlasts HOT shows within POLL of it
            time.sleep(min(POLL, left))
        elif changes.wait(min(CEILING, left)):
            now = time.monotonic()
            hot_until, warm_until = now + HOT, now + CEILING
            if gap:  # a busy file: at most one look every gap (POLL at most, as polling)
                time.sleep(min(gap, left))
        else:
            gap = 0.0  # nothing written for CEILING: a quiet file, look at once again

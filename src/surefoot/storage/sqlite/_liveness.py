"""Process liveness of workers sharing one SQLite file: a lock file per worker id.

A serving worker holds ``<database>-workers/<sha256 of its id>.lock`` with an exclusive
``flock`` for the life of its app. The kernel releases a ``flock`` when the process that
holds it dies (SIGKILL included), so another worker that gets a shared ``flock`` on that
file knows the holder's process is gone and may take its runs over at once instead of
waiting out the lease. A stopped or hung process keeps its lock (the lease handles that:
a claimer whose wall clock may be off judges a live holder's lease by observation too, see
``storage/sql/observed.py``; :meth:`FileLiveness.alive` tells it which holders live). An
idempotency key's owner and a Store's lease token hold a file here the same way
(``._keys``, ``._observed``); a holder in the checking process counts as neither dead nor
alive (its own clock wrote its lease).

Only processes on the same host see each other's locks (as SQLite's own locking needs).
A file that does not exist says nothing (the lease decides). A worker that closes its app
removes its own file; a killed one's file (a few bytes: its worker id) stays until a
sweep removes it, which happens only once none of the dead worker's runs is running any
more (its file is what lets them be taken over before their lease runs out).

Removing a lock file safely: whoever removes one holds its exclusive lock while it
unlinks (so never a live holder's file), and whoever takes a lock (holder or checker)
checks afterwards that the path still names the file it locked; a holder that locked a
file unlinked meanwhile opens the path again (a fresh file), a checker says nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Sequence

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, the lease decides
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileLiveness"]

_TRIES = 50  # a checker's shared lock, or a sweeper's, is held for an instant: try again
_PAUSE = 0.001  # seconds between those tries
_MAX_ID = 4096  # bytes of a lock file read by a sweep (a worker id is far shorter)
# The lock files held by this process, whatever journal holds them: a process is never
# skewed against itself, so its own holders' leases are judged by the wall clock alone.
_HERE: set[str] = set()


class FileLiveness:
    """Lock files next to ``db_path``: ``hold`` one for this worker, ``dead`` tells whose
    holders died."""

    kind = "flock"

    def __init__(self, db_path: str) -> None:
        self.dir = os.path.abspath(db_path) + "-workers"
        self._held: dict[str, int] = {}

    @staticmethod
    def available(db_path: str) -> bool:
        """Lock files work for a database file on this host (not ``:memory:``)."""
        return fcntl is not None and os.path.isfile(db_path)

    def path(self, worker_id: str) -> str:
        name = hashlib.sha256(worker_id.encode()).hexdigest()[:32]
        return os.path.join(self.dir, name + ".lock")

    def hold(self, worker_id: str) -> bool:
        """Hold this worker id's lock file (idempotent); False if it cannot be held."""
        if worker_id in self._held:
            return True
        path, text = self.path(worker_id), worker_id.encode()
        for _ in range(_TRIES):
            try:
                os.makedirs(self.dir, mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                # every opener writes the same bytes: a sweep can tell whose file it is
                os.pwrite(fd, text, 0)
            except OSError:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                time.sleep(_PAUSE)
                continue
            if not _names(path, fd):  # swept between our open and our lock: open again
                os.close(fd)
                continue
            os.ftruncate(fd, len(text))
            self._held[worker_id] = fd
            _HERE.add(path)
            return True
        return False  # held by another live process with the same worker id

    def dead(self, owners: set[str]) -> set[str]:
        """Those of ``owners`` whose lock file exists and is held by no process."""
        out = set()
        for owner in owners:
            if owner in self._held:
                continue
            path = self.path(owner)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # no file: nothing known, the lease decides
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # its holder is alive (maybe hung: the lease handles that)
            else:
                if _names(path, fd):  # else swept meanwhile: nothing known this time
                    out.add(owner)
            finally:
                os.close(fd)  # and with it the shared lock
        return out

    def alive(self, owners: set[str]) -> set[str]:
        """Those of ``owners`` whose lock file exists and is held by another process: that
        process is alive (maybe paused or hung). Neither those held in this process (a
        process is not skewed against itself) nor those with no file (nothing is known)
        are in it; a worker in neither this nor :meth:`dead` is judged by its lease."""
        out = set()
        for owner in owners:
            path = self.path(owner)
            if path in _HERE:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # no file: nothing known
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                out.add(owner)  # held exclusively: by its worker (or for an instant a sweep)
            finally:
                os.close(fd)
        return out

    def sweep(
        self, running: Callable[[Sequence[str]], set[str]], only: set[str] | None = None
    ) -> list[str]:
        """Remove the lock files of dead workers none of whose runs is running.

        ``running(ids)`` says which of ``ids`` still hold a running run (their file must
        stay: it lets those runs be taken over before their lease expires). ``only``: look
        at just these worker ids' files. Returns the worker ids whose file was removed.
        """
        try:
            names = (
                sorted(os.listdir(self.dir))
                if only is None
                else [os.path.basename(self.path(w)) for w in sorted(only)]
            )
        except OSError:
            return []
        mine = {self.path(w) for w in self._held}
        dead: dict[str, str] = {}  # worker id -> its file, for files no process holds
        for name in names:
            path = os.path.join(self.dir, name)
            if not name.endswith(".lock") or path in mine:
                continue
            owner = _dead_owner(path)
            if owner is not None and self.path(owner) == path:
                dead[owner] = path
        if not dead:
            return []
        busy = running(sorted(dead))
        removed = []
        for owner, path in sorted(dead.items()):
            if owner not in busy and _unlink_unheld(path):
                removed.append(owner)
        return removed

    def let_go(self, worker_id: str) -> None:
        """Let go of ``worker_id``'s lock file and remove it (while still holding it)."""
        fd = self._held.pop(worker_id, None)
        if fd is None:
            return
        path = self.path(worker_id)
        _HERE.discard(path)
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)

    def close(self) -> None:
        """Let go of the held lock files and remove them (while still holding them)."""
        for worker_id in list(self._held):
            self.let_go(worker_id)


def _names(path: str, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not swept, not replaced)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _dead_owner(path: str) -> str | None:
    """The worker id written in lock file ``path`` if no process holds it, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return os.pread(fd, _MAX_ID, 0).decode("utf-8", "replace")
    except (BlockingIOError, OSError):
        return None  # held: its worker lives
    finally:
        os.close(fd)


def _unlink_unheld(path: str) -> bool:
    """Unlink ``path`` while holding its exclusive lock (so no process holds it); False
    when a process holds it now or it was swept or replaced meanwhile."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _names(path, fd):
            return False
        os.unlink(path)
        return True
    except (BlockingIOError, OSError):
        return False
    finally:
        os.close(fd)

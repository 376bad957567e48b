"""Process liveness of workers sharing one SQLite file: a lock file per worker id.

A serving worker holds ``<database>-workers/<sha256 of its id>.lock`` with an exclusive
``flock`` for the life of its app. The kernel releases a ``flock`` when the process that
holds it dies (SIGKILL included), so another worker that gets a shared ``flock`` on that
file knows the holder's process is gone and may take its runs over at once instead of
waiting out the lease. A stopped or hung process keeps its lock (the lease handles that).

Only processes on the same host see each other's locks (as SQLite's own locking needs).
A file that does not exist says nothing (the lease decides); a killed worker's file stays
(a few bytes), a worker that closes its app removes its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, the lease decides
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileLiveness"]

_TRIES = 20  # a checker's shared lock may be held for an instant: try again this often


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
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            fd = os.open(self.path(worker_id), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        for _ in range(_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.sched_yield()
                continue
            os.ftruncate(fd, 0)
            os.write(fd, worker_id.encode())
            self._held[worker_id] = fd
            return True
        os.close(fd)  # held by another live process with the same worker id
        return False

    def dead(self, owners: set[str]) -> set[str]:
        """Those of ``owners`` whose lock file exists and is held by no process."""
        out = set()
        for owner in owners:
            if owner in self._held:
                continue
            try:
                fd = os.open(self.path(owner), os.O_RDONLY)
            except OSError:
                continue  # no file: nothing known, the lease decides
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # its holder is alive (maybe hung: the lease handles that)
            else:
                out.add(owner)
            finally:
                os.close(fd)  # and with it the shared lock
        return out

    def close(self) -> None:
        """Let go of the held lock files and remove them."""
        held, self._held = self._held, {}
        for worker_id, fd in held.items():
            with contextlib.suppress(OSError):
                os.unlink(self.path(worker_id))
            os.close(fd)

"""The witness (``?witness=on``): a second durable record of how many commits a SQLite file
holds, so that losing acknowledged commits is refused instead of served.

A ``-wal`` cut at a frame boundary is byte for byte what a power loss before a sync leaves:
SQLite's recovery keeps the transactions before the cut, and nothing in the two files says
more were acknowledged. With the witness on, every write transaction that changes a row also
adds one to a counter row in the database (``surefoot_witness``, the same transaction), and
after its ``COMMIT`` (durable at ``synchronous=FULL``) and before the write returns, the
sidecar file ``<db>-witness`` is raised to that count under an exclusive ``flock`` and
``fdatasync``ed (skipped when another process already wrote as much). The witness is never
lowered, and is written only after the commit it counts is durable, so it is never ahead of
the database: a crash between the commit and the witness leaves it behind, which is fine.
When a process first opens the file, the witness is read (first) and then the counter (after
SQLite's recovery): a counter below the witness means committed transactions are gone, and
the file is refused with ``CorruptionError``.

The sidecar holds two 36-byte slots, 512 bytes apart (separate sectors): magic, the
database's token (16 random bytes, also in its counter row, so a witness beside another
database is noticed), the count, and a CRC-32 of those. Count ``n`` goes to slot ``n % 2``,
so a write torn by a power cut leaves the other slot, one count lower and still not ahead.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
import urllib.parse
import zlib
from dataclasses import dataclass

from ...errors import ConfigError, CorruptionError, StoreUnavailableError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, so no witness
    fcntl = None  # type: ignore[assignment]

__all__ = ["MODES", "WitnessFile"]

MODES = ("off", "on", "accept")
TABLE = (
    "CREATE TABLE surefoot_witness (id INTEGER PRIMARY KEY CHECK (id = 1), "
    "token BLOB NOT NULL, commits INTEGER NOT NULL)"
)
BUMP = "UPDATE surefoot_witness SET commits = commits + 1 WHERE id = 1 RETURNING commits"
_MAGIC = b"sfwitns1"
_SLOT = struct.Struct("<8s16sQI")
_SLOT_AT = (0, 512)
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


@dataclass(frozen=True, slots=True)
class Record:
    """What a witness file (or the database's counter row) says."""

    token: bytes
    count: int


def _pack(rec: Record) -> bytes:
    body = _SLOT.pack(_MAGIC, rec.token, rec.count, 0)[:-4]
    return body + struct.pack("<I", zlib.crc32(body))


def _unpack(raw: bytes) -> Record | None:
    if len(raw) < _SLOT.size:
        return None
    magic, token, count, crc = _SLOT.unpack(raw[: _SLOT.size])
    if magic != _MAGIC or zlib.crc32(raw[: _SLOT.size - 4]) != crc:
        return None
    return Record(token, count)


class WitnessFile:
    """The sidecar ``<db>-witness`` of one database, for one ``SQLiteDB``.

    Attributes:
        writes: times this object wrote and synced the witness (tests count them).
    """

    def __init__(self, db_path: str, url: str, mode: str) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise ConfigError(
                f"witness={mode} needs flock (POSIX) to keep the witness file of several "
                "processes in order, and this platform has none; drop witness= from the URL"
            )
        self.path = db_path + "-witness"
        self.db_path = db_path
        self.url = url
        self.mode = mode
        self.token = b""
        self.writes = 0
        self._seen = 0  # the highest count known to be synced in the file
        self._fd = -1
        self._fd_pid = -1
        self._lock = threading.Lock()

    # -- the file ----------------------------------------------------------------------

    def _fdesc(self) -> int:
        """This process's descriptor (a new one after ``fork``: ``flock`` belongs to the open
        file description, which a child would share with its parent)."""
        if self._fd_pid != _pid:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._fd_pid = _pid
        return self._fd

    def _read(self, fd: int) -> Record | None:
        """The file's highest valid slot; None for an empty (new) file.

        Raises:
            CorruptionError: the file has bytes but no valid slot.
        """
        raw = os.pread(fd, _SLOT_AT[1] + _SLOT.size, 0)
        if not raw.strip(b"\0"):
            return None
        found = [r for r in (_unpack(raw[at:]) for at in _SLOT_AT) if r is not None]
        if not found:
            raise CorruptionError(
                self.url,
                self.path,
                f"the witness {self.path!r} is damaged (no valid record in it), so whether "
                f"{self.db_path!r} lost commits cannot be told; it was refused. "
                + self._what_to_do(),
            )
        return max(found, key=lambda r: r.count)

    def _write(self, fd: int, rec: Record, *, both: bool = False) -> None:
        slots = _SLOT_AT if both else (_SLOT_AT[rec.count % 2],)
        for at in slots:
            os.pwrite(fd, _pack(rec), at)
        os.fdatasync(fd)
        self.writes += 1

    def close(self) -> None:
        if self._fd >= 0 and self._fd_pid == _pid:
            os.close(self._fd)
        self._fd, self._fd_pid = -1, -1

    # -- after each commit -------------------------------------------------------------

    def record(self, count: int) -> None:
        """Raise the witness to ``count`` (a commit just made durable), synced, before the
        write returns; nothing to do if it says as much already."""
        if count <= self._seen:
            return
        try:
            with self._lock:
                fd = self._fdesc()
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    have = self._read(fd)
                    if have is not None and have.count >= count:
                        self._seen = max(self._seen, have.count)
                        return
                    self._write(fd, Record(self.token, count))
                    self._seen = count
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as exc:
            raise StoreUnavailableError(
                self.url,
                f"commit {count} of {self.db_path!r} is durable, but its witness "
                f"{self.path!r} could not be written: {exc}. Check the file, its folder's "
                "permissions and the free disk space.",
            ) from exc

    # -- at open -----------------------------------------------------------------------

    def check_read_only(self) -> None:
        """:meth:`check`, without writing anything, on a read-only connection of its own: run
        before a process's first read-write connection, so a refused file is left as found
        (closing the last read-write connection would checkpoint the -wal into the database
        and delete it). A file SQLite cannot read is left to the read-write open to report.

        Raises:
            CorruptionError: as :meth:`check`.
        """
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.db_path)) + "?mode=ro"
        try:
            ro = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error:
            return
        try:
            self.check(ro, write=False)
        except StoreUnavailableError as exc:
            if isinstance(exc.__cause__, sqlite3.Error):
                return
            raise
        finally:
            ro.close()

    def check(self, c: sqlite3.Connection, *, write: bool = True) -> None:
        """Compare the witness with the database's counter (creating both for a database
        new to the witness); refuse the file if commits it witnessed are gone.

        The witness is read first and the counter after it (under the witness's lock, so no
        writer raises it meanwhile): the witness is never ahead of a durable commit and the
        counter never goes down, so a counter below the witness is loss, whatever other
        processes do.

        Raises:
            CorruptionError: the database holds fewer commits than the witness, the witness
                is missing though commits were made under it, or belongs to another
                database, or is damaged; all left untouched. (``accept`` mode: none of these;
                the witness is set to what the database holds.)
        """
        try:
            # this object's threads one at a time (flock does not part them: they share the
            # descriptor), then other processes' (flock)
            with self._lock:
                if not write and not os.path.exists(self.path):
                    fd, created = -1, True
                else:
                    fd = self._fdesc()
                    created = os.fstat(fd).st_size == 0
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    self._check(c, fd, created, write)
                finally:
                    if fd >= 0:
                        fcntl.flock(fd, fcntl.LOCK_UN)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                self.url, f"cannot read the witness record of {self.db_path!r}: {exc}"
            ) from exc
        except OSError as exc:
            raise StoreUnavailableError(
                self.url,
                f"cannot use the witness {self.path!r} of {self.db_path!r}: {exc}. Check the "
                "file and its folder's permissions.",
            ) from exc

    def _check(self, c: sqlite3.Connection, fd: int, created: bool, write: bool) -> None:
        try:
            have = None if fd < 0 else self._read(fd)
        except CorruptionError:
            if self.mode != "accept":
                raise
            have = None
        db = _counter(c)
        if db is None:
            # No counter row: a database new to the witness. A witness that counted commits
            # belongs to a database that was here before (replaced or recreated).
            if have is not None and have.count > 0 and self.mode != "accept":
                raise CorruptionError(
                    self.url,
                    self.path,
                    f"the witness {self.path!r} says {have.count} commits were made to "
                    f"{self.db_path!r} under ?witness=on, but the database holds no witness "
                    "record: it was replaced by another file, or recreated. It was refused. "
                    "If you replaced or recreated it on purpose, delete the -witness file "
                    "too (or open it once with ?witness=accept); otherwise restore the "
                    "database from a backup (docs/reliability.md, section 4).",
                )
            if not write:
                return
            rec = have if have is not None and have.count == 0 else Record(os.urandom(16), 0)
            # The witness first, synced with its folder entry: a counter row then always has
            # a witness file beside it, and a missing one was deleted.
            self._write(fd, rec, both=True)
            _sync_dir(self.path)
            _create_counter(c, rec.token)
            self.token, self._seen = rec.token, 0
            return
        self.token = db.token
        problem = None
        if have is None:
            if db.count > 0:
                problem = (
                    f"the witness {self.path!r} is missing{'' if created else ' (empty)'}, but "
                    f"{self.db_path!r} says {db.count} commits were made under ?witness=on: "
                    "it was deleted, or the database was copied without it, so whether "
                    "commits were lost cannot be told"
                )
        elif have.token != db.token:
            problem = (
                f"the witness {self.path!r} belongs to another database than "
                f"{self.db_path!r} (their tokens differ): one of the two files was replaced"
            )
        elif have.count > db.count:
            problem = (
                f"{self.db_path!r} holds {db.count} commits but its witness says "
                f"{have.count} were committed and acknowledged: the last "
                f"{have.count - db.count} acknowledged commits are gone (the -wal was cut or "
                "its tail removed, or the disk lost synced writes)"
            )
        if problem is None:
            if not write:
                return
            if have is None:
                self._write(fd, db, both=True)
                _sync_dir(self.path)
            self._seen = db.count if have is None else have.count
            return
        if self.mode != "accept":
            raise CorruptionError(
                self.url, self.path, f"{problem}. It was refused. " + self._what_to_do()
            )
        if not write:
            return
        self._write(fd, db, both=True)  # accept: the witness says what the database holds
        _sync_dir(self.path)
        self._seen = db.count

    def _what_to_do(self) -> str:
        return (
            "Stop every process using the file and restore the database, its -wal and "
            "its -witness from a backup; to accept the database as it is instead, open it "
            "once with ?witness=accept in the URL, which sets the witness to what the "
            "database holds (docs/reliability.md, section 4)."
        )


def _counter(c: sqlite3.Connection) -> Record | None:
    try:
        row = c.execute("SELECT token, commits FROM surefoot_witness WHERE id = 1").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else Record(bytes(row[0]), int(row[1]))


def _create_counter(c: sqlite3.Connection, token: bytes) -> None:
    c.execute("BEGIN IMMEDIATE")
    try:
        # surefoot_schema too (as SQLiteDB.migrate makes it): a file with tables and no
        # surefoot_schema is another program's
        c.execute(
            "CREATE TABLE IF NOT EXISTS surefoot_schema (component TEXT PRIMARY KEY, "
            "version INTEGER NOT NULL)"
        )
        c.execute(TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
        c.execute(
            "INSERT INTO surefoot_witness(id, token, commits) VALUES (1, ?, 0) "
            "ON CONFLICT(id) DO NOTHING",
            (token,),
        )
        c.execute("COMMIT")
    except BaseException:
        if c.in_transaction:
            c.execute("ROLLBACK")
        raise


def _sync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

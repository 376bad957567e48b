"""SQLite done right: WAL, ``synchronous=FULL`` by default, ``busy_timeout``,
``BEGIN IMMEDIATE`` for every write, one connection per thread (and per process after a
fork), short transactions, numbered migrations per component.

Many processes on one file work: WAL lets readers run beside the one writer, and
``BEGIN IMMEDIATE`` takes the write lock up front so two writers never deadlock on an upgrade.

Every driver error is turned into the storage error tree here, with the driver's error as
the cause: ``sqlite3.OperationalError`` (locked, busy, disk I/O, read-only, cannot open)
becomes ``StoreUnavailableError``; any other ``sqlite3.Error`` becomes ``StoreError``. So no
module above ``storage/`` needs to import ``sqlite3``.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ...errors import (
    ConfigError,
    CorruptionError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
)
from ..checks import DEFAULT_MAX_VALUE_BYTES
from . import _schema
from ._changes import FileChanges, wait_for_commit
from ._walcheck import find_damage
from ._witness import BUMP, MODES, WitnessFile

__all__ = ["SQLiteDB", "owner_only"]

_T = TypeVar("_T")
_SYNC = {"OFF", "NORMAL", "FULL", "EXTRA"}
# ?check=: the PRAGMA run on the file when this process first opens it (each reads it all)
CHECKS = {"off": "", "quick": "quick_check", "full": "integrity_check"}
# The files SQLite keeps beside a database; opening a file can create them.
_SIDECARS = ("-wal", "-shm", "-journal")
WAL_PRESIZE = 1_000  # frames: SQLite's wal_autocheckpoint, where a -wal stops growing
WAL_PRESIZE_MAX = 100_000  # frames (~400 MB at 4 KiB pages): more is no use, and the zeros
# are built in memory
_WAL_HEADER = 32  # bytes of the -wal's header, and of each frame's
_FRAME_HEADER = 24
# This process's id, kept by a fork hook: every write asks whether its thread's connection
# was made in this process, and os.getpid() is a system call each time.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def owner_only(path: str) -> None:
    """Create ``path`` readable and writable by its owner only (0600), if it is missing.

    Runs, results and audit logs are private: a new database file is not left to the
    umask. SQLite gives its ``-wal`` and ``-shm`` files the main file's permissions. An
    existing file keeps the permissions it has.
    """
    if path in ("", ":memory:") or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # sqlite3.connect reports the real problem (a read-only folder, …)
    os.close(fd)


class SQLiteDB:
    """One SQLite file, shared by the protocol objects of a ``SQLiteStorage``.

    Args:
        path: the database file.
        synchronous: ``FULL`` (durable on power loss, the default) or ``NORMAL``.
        busy_timeout_ms: how long a writer waits for the lock before failing.
        max_value_bytes: the largest value (key, message, step result) accepted; 0: no limit.
        wal_presize: frames the ``-wal`` is pre-sized to when a journal is created in the
            file (see :meth:`presize_wal`); 0: never.
        check: ``off`` (the default), ``quick`` or ``full``: when this object first opens
            the file, run ``PRAGMA quick_check`` (each page's b-tree structure) or
            ``PRAGMA integrity_check`` (also every index against its table) and refuse a
            file that fails it. Each reads the whole file (docs/reliability.md, section 4,
            has its cost). The ``-wal`` is always checked (see ``_walcheck``).
        witness: ``off`` (the default), ``on`` or ``accept``: keep a second durable record
            of how many commits the file holds, in ``<path>-witness``, written and synced
            after each write commit, and refuse the file at open if it holds fewer (a
            ``-wal`` cut or its tail lost). ``accept``: open once setting the witness to
            what the file holds. Needs ``synchronous=FULL`` or ``EXTRA``; costs one more
            ``fdatasync`` per commit (see ``_witness``; docs/reliability.md, section 4).

    Attributes:
        commits: write transactions committed through this object (tests count them).
        presized: bytes of zeros :meth:`presize_wal` added to the ``-wal`` (tests count them).
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 10_000,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        wal_presize: int = WAL_PRESIZE,
        check: str = "off",
        witness: str = "off",
    ) -> None:
        sync = synchronous.upper()
        if check not in CHECKS:
            raise ConfigError(f"check must be one of {sorted(CHECKS)}, got {check!r}")
        self.check = check
        if sync not in _SYNC:
            raise ConfigError(f"synchronous must be one of {sorted(_SYNC)}, got {synchronous!r}")
        self._witness: WitnessFile | None = None
        if witness not in MODES:
            raise ConfigError(f"witness must be one of {list(MODES)}, got {witness!r}")
        if witness != "off":
            if sync not in ("FULL", "EXTRA"):
                raise ConfigError(
                    f"witness={witness} needs synchronous=FULL or EXTRA, got "
                    f"synchronous={sync}: {sync} does not sync each commit, so after a power "
                    "loss the witness would be ahead of commits that were never durable and "
                    "the file refused for nothing. Drop synchronous= or witness= from the URL."
                )
            if path in ("", ":memory:") or path.startswith("file:"):
                raise ConfigError(
                    f"witness={witness} needs a database file beside which to keep the "
                    f"witness, got {path!r}; use sqlite:///path/to.db or drop witness="
                )
            self._witness = WitnessFile(path, f"sqlite:///{path}", witness)
        if busy_timeout_ms < 0:
            raise ConfigError(f"busy_timeout must be >= 0 ms, got {busy_timeout_ms!r}")
        self.path = path
        self.url = f"sqlite:///{path}"
        self.synchronous = sync
        self.busy_timeout_ms = busy_timeout_ms
        self.max_value_bytes = max_value_bytes
        if wal_presize < 0:
            raise ConfigError(f"wal_presize must be >= 0 frames, got {wal_presize!r}")
        if wal_presize > WAL_PRESIZE_MAX:
            raise ConfigError(
                f"wal_presize must be at most {WAL_PRESIZE_MAX} frames (a -wal stops growing "
                f"at its checkpoint, {WAL_PRESIZE} frames by default), got {wal_presize!r}"
            )
        self.wal_presize = wal_presize
        self.commits = 0
        self.presized = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._migrated: set[str] = set()
        # every connection and file watch opened here, with the thread that owns it
        self._all: list[tuple[sqlite3.Connection, threading.Thread]] = []
        self._watches: list[tuple[FileChanges, threading.Thread]] = []
        self._wal_checked = False
        self._file_checked = False
        self._witness_checked = False

    # -- connections -------------------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (a new one after ``fork``)."""
        local = self._local
        c: sqlite3.Connection | None = getattr(local, "conn", None)
        if c is not None and local.pid == _pid:
            return c
        c = self._connect()
        local.conn = c
        local.pid = _pid
        return c

    def file_changes(self) -> FileChanges | None:
        """This thread's watch of the file's writes (see ``_changes``), made once and kept
        until :meth:`close`; None where the system has no inotify (waits then poll)."""
        local = self._local
        if getattr(local, "changes_pid", None) == _pid:
            return local.changes  # type: ignore[no-any-return]
        w = FileChanges.open(self.path)
        local.changes, local.changes_pid = w, _pid
        if w is not None:
            with self._lock:
                self._watches.append((w, threading.current_thread()))
        return w

    def wait_for_commit(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Until ``ready()`` is true (asked now, then after each commit another connection
        makes to the file) or ``timeout`` seconds; whether it became true. Wakes on the
        commit where the system has inotify, else polls (see ``_changes``)."""
        return wait_for_commit(self.conn(), self.file_changes(), ready, timeout)

    def _connect(self) -> sqlite3.Connection:
        if os.path.isdir(self.path):
            raise StoreUnavailableError(
                self.url, f"{self.path!r} is a directory, not a SQLite database file"
            )
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise StoreUnavailableError(
                self.url,
                f"cannot open {self.path!r}: folder {parent!r} does not exist; create it first",
            )
        existed = os.path.isfile(self.path) and os.path.getsize(self.path) > 0
        before = {s for s in _SIDECARS if os.path.exists(self.path + s)}
        if not self._wal_checked:
            self._check_wal()  # before any connection recovers the -wal (and drops frames)
        if self._witness is not None and not self._witness_checked and existed:
            try:  # read-only: a refused file is left as found
                self._witness.check_read_only()
            except (CorruptionError, StoreUnavailableError):
                self._leave_as_found(None, before)
                raise
        c: sqlite3.Connection | None = None
        owner_only(self.path)
        try:
            c = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            c.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            if existed:
                self._refuse_foreign(c)  # before WAL mode, which would change the file
            mode = self._wal(c)
            c.execute(f"PRAGMA synchronous={self.synchronous}")
            if existed and self.check != "off" and not self._file_checked:
                self._check_file(c)
            if self._witness is not None and not self._witness_checked:
                self._witness.check(c)  # after SQLite's recovery of the -wal
                self._witness_checked = True
        except sqlite3.OperationalError as exc:
            if c is not None:
                c.close()
            raise self.error(exc) from exc
        except sqlite3.DatabaseError as exc:
            self._leave_as_found(c, before)
            if "malformed" in str(exc):
                raise _malformed(self.url, self.path, str(exc)) from exc
            raise StoreUnavailableError(
                self.url,
                f"cannot use {self.path!r} as a surefoot database: {exc}. It is not a SQLite "
                "file or it is corrupt; it was left untouched (and no -wal or -shm file was "
                "left beside it). Point the URL at another file.",
            ) from exc
        except (SchemaVersionError, CorruptionError, StoreUnavailableError):
            self._leave_as_found(c, before)
            raise
        if str(mode).lower() != "wal":
            raise StoreUnavailableError(
                self.url, f"{self.path!r} cannot use WAL mode (got {mode!r}); use a local disk"
            )
        with self._lock:
            self._all.append((c, threading.current_thread()))
        return c

    def _check_wal(self) -> None:
        """Refuse a ``-wal`` whose damage SQLite's recovery would silently drop committed
        transactions at (see ``_walcheck``). Found twice, 50 ms apart, the same: a frame
        another process is writing at this moment can read torn once.

        Raises:
            CorruptionError: naming the frame; the files were left untouched.
        """
        wal = self.path + "-wal"
        try:
            found = find_damage(wal)
            if found is not None:
                time.sleep(0.05)
                again = find_damage(wal)
                if again is None or (again.bad_frame, again.kept) != (found.bad_frame, found.kept):
                    found = None  # it moved: a writer's frames, not damage
        except OSError as exc:
            raise StoreUnavailableError(self.url, f"cannot read {wal!r}: {exc}") from exc
        if found is not None:
            raise CorruptionError(
                self.url,
                f"{wal} frame {found.bad_frame}",
                f"{wal!r} is damaged: {found.describe()}. It was refused and left untouched "
                "(opening it with SQLite would lose those transactions for good). Stop "
                "every process using the file and restore it and its -wal from a backup; to "
                "accept the loss instead, open it once with the sqlite3 shell, which drops "
                "them (docs/reliability.md, section 4).",
            )
        self._wal_checked = True

    def _check_file(self, c: sqlite3.Connection) -> None:
        """Run the ``check`` PRAGMA; refuse the file if it finds a problem.

        Raises:
            CorruptionError: naming the PRAGMA's first findings.
        """
        pragma = CHECKS[self.check]
        try:
            found = [str(r[0]) for r in c.execute(f"PRAGMA {pragma}(20)")]
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
                raise  # locked, busy, I/O: not a finding
            found = [str(exc)]
        if found != ["ok"]:
            raise CorruptionError(
                self.url,
                f"{self.path} ({pragma})",
                f"{self.path!r} failed PRAGMA {pragma}: {'; '.join(found[:5])}. It was refused. "
                "Stop every process using the file and restore it from a backup "
                "(docs/reliability.md, section 4).",
            )
        self._file_checked = True

    def _refuse_foreign(self, c: sqlite3.Connection) -> None:
        """Raise ``SchemaVersionError`` if the file holds another program's tables."""
        names = [
            str(r[0])
            for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        if names and "surefoot_schema" not in names:
            raise SchemaVersionError(
                self.url,
                f"{self.path!r} is not a surefoot database (it has tables "
                f"{', '.join(sorted(names)[:5])} and no surefoot_schema); it was left "
                "untouched. Use a new file for surefoot.",
            )

    def _leave_as_found(self, c: sqlite3.Connection | None, before: set[str]) -> None:
        """After refusing the file: close ``c`` and delete the -wal/-shm/-journal files that
        opening it created, so the folder is as it was. A -wal file that holds data is kept
        (another process wrote it; it is not ours to delete)."""
        if c is not None:
            c.close()
        created = [s for s in _SIDECARS if s not in before and os.path.exists(self.path + s)]
        wal = self.path + "-wal"
        if "-wal" in created and os.path.getsize(wal) > 0:
            return
        for suffix in created:
            try:
                os.remove(self.path + suffix)
            except OSError:
                pass  # gone already, or not ours to remove

    def _wal(self, c: sqlite3.Connection) -> str:
        """Switch ``c`` to WAL and return the journal mode now in force.

        Two processes opening a new file at the same moment can both try the switch; the
        loser gets "database is locked" at once (SQLite does not call the busy handler
        here), so it tries again for up to ``busy_timeout``.
        """
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                return str(c.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def close(self) -> None:
        """Close every connection (and file watch) this object opened (in this process).

        Those of this thread, and of threads that have ended, are closed now. Another live
        thread may be inside a statement on its own connection: closing it under that
        thread would free what SQLite is using (the process crashed, before). Those are let
        go instead: the next use in that thread opens a new one, and the old one is closed
        when the last reference to it, the statement's, is gone.
        """
        me = threading.current_thread()
        with self._lock:
            conns, self._all = self._all, []
            watches, self._watches = self._watches, []
        for c, owner in conns:
            if owner is me or not owner.is_alive():
                try:
                    c.close()
                except sqlite3.Error:
                    pass
        for w, owner in watches:
            if owner is me or not owner.is_alive():
                w.close()
        if self._witness is not None:
            self._witness.close()
        self._local = threading.local()

    # -- transactions ------------------------------------------------------------------

    def error(self, exc: sqlite3.Error) -> StoreError:
        """The storage error for a driver error (raise it ``from exc``)."""
        text = " ".join(str(exc).split()).rstrip(" .")
        if "malformed" in text:  # SQLITE_CORRUPT: SQLite's own check of a page failed
            return _malformed(self.url, self.path, text)
        if isinstance(exc, sqlite3.OperationalError):
            hint = (
                "Another process holds the write lock; raise busy_timeout in the URL "
                "(?busy_timeout=30000) or retry."
                if "locked" in text or "busy" in text
                else "Check the file, its folder's permissions and the free disk space."
            )
            return StoreUnavailableError(
                self.url, f"SQLite cannot use {self.path!r}: {text}. {hint}"
            )
        return StoreError(
            self.url,
            f"SQLite refused a statement on {self.path!r}: {text} "
            f"({type(exc).__name__}); nothing was committed.",
        )

    def read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """Run one read outside any transaction and return its rows."""
        try:
            return self.conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self.error(exc) from exc

    def _begin(self, c: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``: the file's write lock, waited for up to ``busy_timeout``."""
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreUnavailableError(
                self.url,
                f"could not take the write lock on {self.path!r} within "
                f"{self.busy_timeout_ms} ms: {exc}. Another process holds it; raise "
                "busy_timeout in the URL (?busy_timeout=30000) or retry.",
            ) from exc

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on error).

        Raises:
            StoreUnavailableError: the write lock was not had within ``busy_timeout``, or
                the file cannot be written (driver ``OperationalError``).
            StoreError: the driver refused a statement (any other ``sqlite3.Error``).
        """
        c = self.conn()
        self._begin(c)
        witnessed = 0
        try:
            changes = c.total_changes
            yield c
            if self._witness is not None:
                witnessed = self._count(c, changes)
            c.execute("COMMIT")
        except BaseException as exc:
            _roll_back(c)
            if isinstance(exc, sqlite3.Error):
                raise self.error(exc) from exc
            raise
        self.commits += 1
        if witnessed:
            self._witness.record(witnessed)  # type: ignore[union-attr]

    def transact(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(connection, *args)`` in one write transaction (``BEGIN IMMEDIATE`` …
        ``COMMIT``, rolled back if it raises); its result. The same as :meth:`write`, as a
        plain call (a hot path's: no generator-based context manager).

        Raises:
            StoreUnavailableError / StoreError: as :meth:`write`.
        """
        c = self.conn()
        self._begin(c)
        witnessed = 0
        try:
            changes = c.total_changes
            out = fn(c, *args)
            if self._witness is not None:
                witnessed = self._count(c, changes)
            c.execute("COMMIT")
        except BaseException as exc:
            _roll_back(c)
            if isinstance(exc, sqlite3.Error):
                raise self.error(exc) from exc
            raise
        self.commits += 1
        if witnessed:
            self._witness.record(witnessed)  # type: ignore[union-attr]
        return out

    def _count(self, c: sqlite3.Connection, changes: int) -> int:
        """In a write transaction with the witness on: if it changed a row since
        ``changes`` (``total_changes`` at its start), add one to the file's commit counter;
        the new count (0: nothing to witness)."""
        if c.total_changes == changes:
            return 0  # a transaction that changed nothing commits nothing
        return int(c.execute(BUMP).fetchone()[0])

    def write_one(self, sql: str, params: Sequence[Any]) -> int:
        """One statement as its own write transaction; its row count.

        The same transaction as ``BEGIN IMMEDIATE``, the statement, ``COMMIT`` (one
        statement under :meth:`write`), in one driver call instead of three: on a connection
        in autocommit, a lone write statement takes the write lock (waiting up to
        busy_timeout) before it reads, and commits (at the file's ``synchronous`` level) or
        rolls back as a whole. A journalled step's hot path: one per step. Counted in
        ``commits`` when it changed a row (one that changed none has written nothing).

        Raises:
            StoreUnavailableError / StoreError: as :meth:`write`.
        """
        return self._alone(False, sql, params)  # type: ignore[no-any-return]

    def writer_of(self, sql: str) -> Callable[[Sequence[Any]], int]:
        """``write_one`` bound to ``sql``, without a Python frame around it: a journalled
        step's hot path calls it once per step."""
        return functools.partial(self._alone, False, sql)

    def write_returning(self, sql: str, params: Any) -> list[Any]:
        """One ``… RETURNING`` statement as its own write transaction (see
        :meth:`write_one`); the rows it returned (read to the end, which commits it).
        Counted in ``commits`` when it returned a row: the statements run this way return
        the rows they wrote, and one that returns none has written nothing.

        Raises:
            StoreUnavailableError / StoreError: as :meth:`write`.
        """
        return self._alone(True, sql, params)  # type: ignore[no-any-return]

    def _alone(self, rows: bool, sql: str, params: Any) -> Any:
        c = self.conn()
        if self._witness is not None:  # the statement and the counter: one transaction
            return self._alone_witnessed(c, rows, sql, params)
        if c.in_transaction:  # another transaction is open here: refused, as write() does
            self._begin(c)
        try:
            cur = c.execute(sql, params)
            out = cur.fetchall() if rows else cur.rowcount
        except sqlite3.Error as exc:
            raise self.error(exc) from exc
        if out:
            self.commits += 1
        return out

    def _alone_witnessed(self, c: sqlite3.Connection, rows: bool, sql: str, params: Any) -> Any:
        """:meth:`_alone` with the witness on: ``BEGIN IMMEDIATE``, the statement, the
        counter, ``COMMIT``, then the witness (counted in ``commits`` as :meth:`_alone`)."""
        self._begin(c)
        witnessed = 0
        try:
            changes = c.total_changes
            cur = c.execute(sql, params)
            out = cur.fetchall() if rows else cur.rowcount
            witnessed = self._count(c, changes)
            c.execute("COMMIT")
        except BaseException as exc:
            _roll_back(c)
            if isinstance(exc, sqlite3.Error):
                raise self.error(exc) from exc
            raise
        if out:
            self.commits += 1
        if witnessed:
            self._witness.record(witnessed)  # type: ignore[union-attr]
        return out

    def presize_wal(self) -> int:
        """Extend the ``-wal`` with zeros to ``wal_presize`` frames; the bytes added.

        A commit that extends the ``-wal`` costs about 1.6x one that writes into space the
        file already has (the file's size changes, so the fsync writes metadata too), and a
        new ``-wal`` grows for its first 1,000 frames, until the first checkpoint lets
        SQLite write it again from its start (``benchmarks/bench_sqlite_ceiling.py``). The
        zeros go only past the file's end, under the write lock (no frame is appended
        meanwhile), and are fsynced: a zero frame is no valid frame, so recovery after a
        crash stops where the last committed frame ends, as it would at the file's end.
        Only at ``synchronous=FULL``/``EXTRA`` (the others do not fsync each commit).
        """
        if self.wal_presize <= 0 or self.synchronous not in ("FULL", "EXTRA"):
            return 0
        c = self.conn()
        page = int(c.execute("PRAGMA page_size").fetchone()[0])
        want = _WAL_HEADER + self.wal_presize * (page + _FRAME_HEADER)
        self._begin(c)
        try:
            try:
                fd = os.open(self.path + "-wal", os.O_RDWR)
            except FileNotFoundError:
                return 0
            try:
                have = os.fstat(fd).st_size
                if have >= want:
                    return 0
                os.pwrite(fd, bytes(want - have), have)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreUnavailableError(
                self.url, f"cannot pre-size {self.path!r}-wal: {exc}; check the free disk space"
            ) from exc
        finally:
            _roll_back(c)  # nothing was written in the transaction: it only held the lock
        self.presized += want - have
        return want - have

    # -- schema ------------------------------------------------------------------------

    def migrate(self, component: str, migrations: Sequence[str]) -> bool:
        """Bring ``component``'s tables to the newest of ``migrations`` (numbered from 1);
        whether this call created them (the file had none of ``component``'s tables).

        Each migration is one or more DDL statements separated by ``;`` (a trigger's body,
        ``BEGIN … END``, may hold ``;`` of its own). Applied migrations
        are recorded in ``surefoot_schema``.

        Migrations run in one ``BEGIN IMMEDIATE`` transaction that reads the record first,
        so processes opening the file together take turns: the second finds the first's
        record and applies nothing.

        Raises:
            SchemaVersionError: the file belongs to another program (tables but no
                ``surefoot_schema``, or ``component``'s tables and no record of them), or it
                was written by a newer surefoot.
            CorruptionError: the record of ``component`` is damaged: unreadable, out of
                range, its table and index disagree, or it says a migration is not applied
                whose tables the file already holds. Nothing was changed.
        """
        if component in self._migrated:
            return False
        try:
            found = _schema.apply(self, component, migrations)
        except (SchemaVersionError, CorruptionError):
            self.close()  # the last connection's close removes the -wal and -shm files
            raise
        self._migrated.add(component)
        return found == 0


def _malformed(url: str, path: str, text: str) -> CorruptionError:
    """The error for SQLite's own "database disk image is malformed" (a page that fails
    SQLite's structural checks): the file is damaged, and retrying reads the same bytes."""
    return CorruptionError(
        url,
        f"{path} (SQLite: malformed)",
        f"SQLite found {path!r} damaged: {text}. Nothing was served from the damaged part. "
        "Stop every process using the file and restore it from a backup; `PRAGMA "
        "integrity_check` on a copy lists the damage (docs/reliability.md, section 4).",
    )


def _roll_back(c: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any (a write that failed part-way)."""
    if c.in_transaction:
        try:
            c.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection is gone; the transaction died with it

"""``?witness=on`` (issue 27, section 4): a second durable record of how many commits a
SQLite file holds, so a ``-wal`` cut at a frame boundary (what SQLite's recovery silently
shortens to the transactions before the cut) is refused with ``CorruptionError`` instead of
served. Without the witness that cut opens with the last commits gone, as documented. The
witness is refused with ``synchronous=NORMAL``; a crash between a commit and its witness
leaves the witness behind, never a false alarm; several processes keep it monotone.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from surefoot.errors import ConfigError, CorruptionError
from surefoot.statebus import Store
from surefoot.storage.sqlite import SQLiteDB
from surefoot.storage.sqlite._witness import WitnessFile

ON = "?witness=on"


def _witness(db: Path) -> int:
    """The count the witness file beside ``db`` holds (its highest valid slot)."""
    import os

    w = WitnessFile(str(db), "sqlite:///x", "on")
    fd = os.open(w.path, os.O_RDONLY)
    try:
        rec = w._read(fd)
    finally:
        os.close(fd)
    assert rec is not None
    return rec.count


def _counter(db: Path) -> int:
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT commits FROM surefoot_witness").fetchone()[0])


def _kept_in_wal(tmp_path: Path, query: str = ON, n: int = 20) -> Path:
    """A store written with ``query`` whose last ``n`` writes (``k{i} = 1000 + i``) are only
    in its -wal, copied (file, -wal, -witness) to a folder of their own while a connection
    holds the source open (so its -wal is not checkpointed on close)."""
    src = tmp_path / "src" / "s.db"
    src.parent.mkdir()
    with closing(Store(f"sqlite:///{src}{query}")) as s:
        for i in range(n):
            s.write(f"k{i}", i)
    keep = sqlite3.connect(src)
    keep.execute("SELECT count(*) FROM sqlite_master").fetchall()
    with closing(Store(f"sqlite:///{src}{query}")) as s:
        for i in range(n):
            s.write(f"k{i}", 1000 + i)
    out = tmp_path / "copy"
    out.mkdir()
    for suffix in ("", "-wal", "-witness"):
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{out / 's.db'}{suffix}")
    keep.close()
    return out / "s.db"


def _cut_last_frames(db: Path, frames: int) -> None:
    """Remove the last ``frames`` frames of the -wal: a cut at a frame boundary, what a
    power loss before their sync would leave."""
    wal = Path(f"{db}-wal")
    page = int.from_bytes(wal.read_bytes()[8:12], "big")
    size = wal.stat().st_size
    assert (size - 32) % (24 + page) == 0, size
    with open(wal, "r+b") as f:
        f.truncate(size - frames * (24 + page))


def test_a_wal_cut_at_a_frame_boundary_is_refused_with_the_witness(tmp_path: Path) -> None:
    """The last commit's frame removed: SQLite keeps the transactions before it. With the
    witness the file is refused, naming both counts and what to do; the files are kept."""
    db = _kept_in_wal(tmp_path)
    witnessed = _witness(db)
    _cut_last_frames(db, 1)
    wal_size = Path(f"{db}-wal").stat().st_size
    with pytest.raises(CorruptionError) as err:
        Store(f"sqlite:///{db}{ON}")
    msg = str(err.value)
    assert f"holds {witnessed - 1} commits but its witness says {witnessed}" in msg, msg
    assert "backup" in msg and "?witness=accept" in msg
    assert err.value.where == f"{db}-witness"
    assert Path(f"{db}-wal").stat().st_size == wal_size  # left as found


def test_a_deleted_wal_is_refused_with_the_witness(tmp_path: Path) -> None:
    """The whole -wal gone (its 20 commits): SQLite opens the database as checkpointed
    before them; the witness counts them missing."""
    db = _kept_in_wal(tmp_path)
    witnessed = _witness(db)
    Path(f"{db}-wal").unlink()
    with pytest.raises(CorruptionError, match="the last 20 acknowledged commits are gone"):
        Store(f"sqlite:///{db}{ON}")
    assert _counter(db) == witnessed - 20


def test_damage_in_the_last_acknowledged_transaction_is_refused_with_the_witness(
    tmp_path: Path,
) -> None:
    """A flipped bit in the last frame: the -wal check cannot tell it from a power loss
    during that commit (and opens it, one write short); the witness knows that commit was
    acknowledged, so the file is refused."""
    db = _kept_in_wal(tmp_path)
    witnessed = _witness(db)
    wal = Path(f"{db}-wal")
    data = bytearray(wal.read_bytes())
    data[-4096 + 100] ^= 0x10  # inside the last frame's page
    wal.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=f"its witness says {witnessed}"):
        Store(f"sqlite:///{db}{ON}")


def test_without_the_witness_the_same_cut_opens_with_the_last_commit_gone(
    tmp_path: Path,
) -> None:
    """What the witness is for (docs/reliability.md, section 4, "What cannot be detected"):
    without it, the cut copy opens, no error, the last acknowledged write silently lost."""
    db = _kept_in_wal(tmp_path, query="")
    _cut_last_frames(db, 1)
    with closing(Store(f"sqlite:///{db}")) as s:
        assert s.read("k19").value == 19  # 1019 was acknowledged, and is gone
        assert s.read("k18").value == 1018


def test_accept_sets_the_witness_to_what_the_file_holds_once(tmp_path: Path) -> None:
    """``?witness=accept`` opens the cut file (the loss accepted), and afterwards
    ``?witness=on`` opens it and goes on witnessing."""
    db = _kept_in_wal(tmp_path)
    _cut_last_frames(db, 1)
    with closing(Store(f"sqlite:///{db}?witness=accept")) as s:
        assert s.read("k19").value == 19
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        s.write("k19", 2019)
    assert _witness(db) == _counter(db)


def test_an_undamaged_copy_opens_and_the_witness_matches(tmp_path: Path) -> None:
    """No false alarm: the copy as written opens with every write."""
    db = _kept_in_wal(tmp_path)
    assert _witness(db) == _counter(db) > 40
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        assert [s.read(f"k{i}").value for i in range(20)] == [1000 + i for i in range(20)]


@pytest.mark.parametrize("sync", ["NORMAL", "OFF"])
def test_the_witness_with_a_mode_that_does_not_sync_each_commit_is_refused(
    tmp_path: Path, sync: str
) -> None:
    """NORMAL (and OFF) do not sync each commit: a witness would be ahead after a power
    loss, a false alarm. Refused at open, naming both options; nothing is created."""
    db = tmp_path / "n.db"
    with pytest.raises(ConfigError) as err:
        Store(f"sqlite:///{db}?witness=on&synchronous={sync}")
    assert f"synchronous={sync}" in str(err.value) and "FULL" in str(err.value)
    assert not db.exists() and not Path(f"{db}-witness").exists()


def test_bad_witness_values_and_memory_are_config_errors(tmp_path: Path) -> None:
    """A value that is not off/on/accept, and a database with no file, are refused."""
    with pytest.raises(ConfigError, match="witness must be one of"):
        Store(f"sqlite:///{tmp_path / 'b.db'}?witness=yes")
    with pytest.raises(ConfigError, match="needs a database file"):
        SQLiteDB(":memory:", witness="on")


def test_a_deleted_witness_is_refused_when_commits_were_made_under_it(tmp_path: Path) -> None:
    """The database says commits were witnessed, the witness file is gone: refused, saying
    so; a database new to the witness (made without it) opens and starts one."""
    db = tmp_path / "d.db"
    with closing(Store(f"sqlite:///{db}")) as s:  # made without the witness
        s.write("a", 1)
    with closing(Store(f"sqlite:///{db}{ON}")) as s:  # turned on later: a new witness, no alarm
        s.write("a", 2)
    assert _witness(db) == _counter(db) >= 1
    Path(f"{db}-witness").unlink()
    with pytest.raises(CorruptionError, match="is missing") as err:
        Store(f"sqlite:///{db}{ON}")
    assert f"says {_counter(db)} commits were made under ?witness=on" in str(err.value)
    with closing(Store(f"sqlite:///{db}?witness=accept")) as s:
        assert s.read("a").value == 2
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        assert s.read("a").value == 2


def test_a_recreated_database_beside_an_old_witness_is_refused(tmp_path: Path) -> None:
    """A witness that counted commits, beside a database with no witness record (replaced
    or recreated): refused, not silently restarted."""
    db = tmp_path / "r.db"
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        s.write("a", 1)
    db.unlink()
    with pytest.raises(CorruptionError, match="holds no witness record"):
        Store(f"sqlite:///{db}{ON}")


def test_a_witness_of_another_database_is_refused(tmp_path: Path) -> None:
    """Each database's witness carries its token: another database's is noticed."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):
        with closing(Store(f"sqlite:///{db}{ON}")) as s:
            s.write("x", 1)
    shutil.copy(f"{a}-witness", f"{b}-witness")
    with pytest.raises(CorruptionError, match="belongs to another database"):
        Store(f"sqlite:///{b}{ON}")


def test_a_torn_witness_slot_falls_back_to_the_other(tmp_path: Path) -> None:
    """A witness write torn by a power cut damages one slot; the other, one count lower
    (not ahead), is used: the file opens. Both damaged: refused as damaged."""
    db = tmp_path / "t.db"
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        s.write("a", 1)
        s.write("a", 2)
    n = _counter(db)
    w = Path(f"{db}-witness")
    raw = bytearray(w.read_bytes())
    at = 0 if n % 2 == 0 else 512
    raw[at + 30] ^= 0xFF
    w.write_bytes(bytes(raw))
    assert _witness(db) == n - 1
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        assert s.read("a").value == 2
        s.write("a", 3)
    raw = bytearray(w.read_bytes())
    raw[0:36] = raw[512:548] = b"x" * 36
    w.write_bytes(bytes(raw))
    with pytest.raises(CorruptionError, match="is damaged"):
        Store(f"sqlite:///{db}{ON}")


def test_a_transaction_that_changes_nothing_is_not_counted(tmp_path: Path) -> None:
    """The counter counts commits that changed a row: a refused or empty write commits
    nothing, and no witness is written for it."""
    db = SQLiteDB(str(tmp_path / "c.db"), witness="on")
    db.migrate("t", ["CREATE TABLE t (k INTEGER PRIMARY KEY)"])
    before = _counter(tmp_path / "c.db")
    assert db.write_one("UPDATE t SET k = 2 WHERE k = 1", ()) == 0
    with db.write():
        pass
    assert _counter(tmp_path / "c.db") == before
    assert db.write_one("INSERT INTO t (k) VALUES (1)", ()) == 1
    assert db.write_returning("INSERT INTO t (k) VALUES (2) RETURNING k", ()) == [(2,)]
    assert db.transact(lambda c: c.execute("INSERT INTO t (k) VALUES (3)").rowcount) == 1
    db.close()
    assert _counter(tmp_path / "c.db") == before + 3 == _witness(tmp_path / "c.db")


CRASH = textwrap.dedent(
    """
    import os, sys
    from surefoot.statebus import Store
    from surefoot.storage.sqlite._witness import WitnessFile

    s = Store(f"sqlite:///{sys.argv[1]}?witness=on")
    s.write("a", 1)
    WitnessFile.record = lambda self, count: os._exit(3)  # dies after COMMIT, before it
    s.write("a", 2)
    """
)


def test_a_crash_between_the_commit_and_its_witness_is_no_false_alarm(tmp_path: Path) -> None:
    """The process dies after the commit and before the witness: the witness is behind,
    the file opens with the write (it was committed), and the next write catches up."""
    db = tmp_path / "k.db"
    p = subprocess.run([sys.executable, "-c", CRASH, str(db)], timeout=60, check=False)
    assert p.returncode == 3
    assert _witness(db) == _counter(db) - 1
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        assert s.read("a").value == 2
        s.write("a", 3)
    assert _witness(db) == _counter(db)


WRITERS = textwrap.dedent(
    """
    import os, sys
    from surefoot.statebus import Store
    from surefoot.storage.sqlite._witness import WitnessFile

    db, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = Store(f"sqlite:///{db}?witness=on")
    w = WitnessFile(db, "sqlite:///x", "on")
    fd = os.open(w.path, os.O_RDONLY)
    seen = []
    for i in range(n):
        s.write(f"{me}-{i}", i)
        seen.append(w._read(fd).count)
    print(" ".join(map(str, seen)))
    """
)


def test_several_processes_keep_the_witness_monotone_and_equal_to_the_commits(
    tmp_path: Path,
) -> None:
    """Four processes write the same file at once: the witness each sees after each of its
    writes never goes down, and at the end it equals the commits the file holds."""
    db = tmp_path / "m.db"
    with closing(Store(f"sqlite:///{db}{ON}")) as s:
        s.write("start", 0)
    start = _counter(db)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITERS, str(db), f"p{i}", "25"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    for out in outs:
        seen = [int(x) for x in out.split()]
        assert len(seen) == 25 and seen == sorted(seen), seen
    assert _counter(db) == start + 100 == _witness(db)


def test_a_count_written_late_never_lowers_the_witness(tmp_path: Path) -> None:
    """Two writers with descriptors of their own (as two processes): the one whose commit
    came first writing its witness last leaves the higher count in place."""
    db = tmp_path / "l.db"
    a, b = SQLiteDB(str(db), witness="on"), SQLiteDB(str(db), witness="on")
    a.conn()
    b.conn()
    n = _counter(db)
    assert a._witness is not None and b._witness is not None
    a._witness.record(n + 3)
    b._witness.record(n + 1)  # a commit before a's, its witness after
    assert _witness(db) == n + 3 and b._witness.writes == 0  # read, not written
    a.close()
    b.close()


def test_threads_of_one_process_share_the_witness(tmp_path: Path) -> None:
    """Eight threads writing at once through one ``SQLiteDB`` (a connection each, one
    witness descriptor): the witness equals at the end the commits the file holds."""
    import threading

    db = tmp_path / "th.db"
    sdb = SQLiteDB(str(db), witness="on")
    barrier = threading.Barrier(8)

    def work(me: int) -> None:
        barrier.wait()
        for i in range(10):
            sdb.write_one("INSERT INTO t (who) VALUES (?)", (f"{me}-{i}",))

    sdb.migrate("t", ["CREATE TABLE t (k INTEGER PRIMARY KEY, who TEXT)"])
    start = _counter(db)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sdb.close()
    assert _counter(db) == start + 80 == _witness(db)
    with closing(Store(f"sqlite:///{db}{ON}")):
        pass  # opens: the token of the file and of the database agree

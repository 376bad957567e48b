"""Damage on the disk under a SQLite journal or store is refused with ``CorruptionError``,
never served as data (issue 27, section 4): a bit flipped inside a step row (its checksum),
inside a chunk of a large value (its content hash), and inside a ``-wal`` frame that
committed transactions follow (SQLite's recovery would silently drop them). And what is not
damage opens as before: an intact ``-wal``, a torn tail, a journal written before rows
carried checksums.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable
from surefoot.errors import ConfigError, CorruptionError, RunFailedError
from surefoot.statebus import Store
from surefoot.storage.runs import StepWrite
from surefoot.storage.sqlite import SQLiteDB
from surefoot.storage.sqlite._journal import MIGRATIONS, SQLiteJournal
from surefoot.storage.sqlite._state import SQLiteStateStore
from surefoot.storage.sqlite._walcheck import find_damage

MARK = "needle-" + "q" * 40  # a step result easy to find in the file's bytes


def _flip_in_file(path: Path, needle: bytes, copies: int = 1, at: int = 10) -> None:
    """Flip one bit of the byte ``at`` into each of the ``copies`` occurrences of ``needle``
    in the file."""
    data = bytearray(path.read_bytes())
    assert data.count(needle) == copies, data.count(needle)
    start = 0
    for _ in range(copies):
        start = data.index(needle, start)
        data[start + at] ^= 0x01
        start += len(needle)
    path.write_bytes(bytes(data))


def _journalled(path: Path, result: Any, **app_args: Any) -> None:
    """A finished run ``r`` whose step ``emit`` returned ``result``; the file closed (so
    its -wal is checkpointed into it and removed)."""
    app = durable.App(f"sqlite:///{path}", **app_args)

    @app.step
    async def emit() -> Any:
        return result

    @app.workflow
    async def flow() -> int:
        await emit()
        return 1

    assert app.start(flow, run_id="r").result(timeout=30) == 1
    app.close()
    assert not Path(f"{path}-wal").exists()


def _steps(path: Path, **app_args: Any) -> list[Any]:
    app = durable.App(f"sqlite:///{path}", **app_args)
    try:
        return app.journal.steps("r")
    finally:
        app.close()


def test_a_bit_flipped_in_a_step_row_is_refused_not_served(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    _journalled(path, MARK)
    assert [s.result for s in _steps(path)] == [f'"{MARK}"']
    _flip_in_file(path, MARK.encode())  # 'q' (0x71) becomes 'p' (0x70)
    with pytest.raises(CorruptionError) as err:
        _steps(path)
    assert "step '1' of run 'r'" in err.value.where and "backup" in str(err.value)


def test_a_bit_flipped_in_a_chunk_of_a_large_value_is_refused(tmp_path: Path) -> None:
    big = [f"{MARK}-{i}" if i == 700 else f"item-{i:05d}" for i in range(2000)]
    path = tmp_path / "j.db"
    _journalled(path, big, value_chunks=1024)
    import json

    got = _steps(path, value_chunks=1024)
    assert json.loads(got[0].result) == big  # stored as chunks, read back whole
    _flip_in_file(path, MARK.encode())
    with pytest.raises(CorruptionError) as err:
        _steps(path, value_chunks=1024)
    assert "durable_chunks" in err.value.where


def test_a_journal_written_before_checksums_opens_and_serves_its_rows(tmp_path: Path) -> None:
    """Migration 9 adds the column; rows written before have NULL there: served unchecked.
    Rows written after are checked, and a position journalled again gets its checksum."""
    path = tmp_path / "old.db"
    db = SQLiteDB(str(path))
    db.migrate("durable", MIGRATIONS[:8])
    with db.write() as c:
        c.execute(
            "INSERT INTO durable_runs (run_id, workflow, version, structure_hash, args, "
            "strategy, status, created_at, updated_at, epoch) VALUES ('x', 'wf', '1', 'h', "
            "'[[], {}]', 'journal_keys', 'running', 1.0, 1.0, 3)"
        )
        c.execute(
            "INSERT INTO durable_steps (id, run_id, pos, name, kind, status, result, error, "
            "attempts, epoch, started_at, finished_at) SELECT (run_no << 24) + 1, 'x', '1', "
            "'s', 'step', 'done', '\"old\"', NULL, 1, 3, 1.0, 1.0 FROM durable_runs"
        )
    db.close()
    j = SQLiteJournal(SQLiteDB(str(path)))
    assert [(s.pos, s.result) for s in j.steps("x")] == [("1", '"old"')]
    new = StepWrite("x", 3, "2", "s", "step", "done", '"new"', None, 1, 2.0, 2.0, order=2)
    assert j.commit([new]) == [True]
    j.db.close()
    c = sqlite3.connect(path)
    sums = c.execute("SELECT pos, checksum IS NULL FROM durable_steps ORDER BY id").fetchall()
    c.execute("UPDATE durable_steps SET result = '\"NEW\"' WHERE pos = '2'")
    c.commit()
    c.close()
    assert sums == [("1", 1), ("2", 0)]
    j = SQLiteJournal(SQLiteDB(str(path)))
    with pytest.raises(CorruptionError):
        j.steps("x")
    j.db.close()


# -- the -wal ---------------------------------------------------------------------------

WRITER = 60  # keys written while the -wal is kept


def _store_with_wal(tmp_path: Path, start: Path | None = None) -> Path:
    """A store file whose last ``WRITER`` writes (``k{i} = 1000 + i``) are only in its
    -wal, copied (file and -wal) to a folder of their own while the writer holds them open.
    ``start``: a closed store file to begin from (else a new one)."""
    src = tmp_path / "src" / "s.db"
    src.parent.mkdir()
    if start is not None:
        shutil.copy(start, src)
    keep = sqlite3.connect(src)  # keeps the -wal from being checkpointed away at close
    store = Store(f"sqlite:///{src}")
    for i in range(WRITER):
        store.write(f"k{i}", 1000 + i)
    dest = tmp_path / "copy" / "s.db"
    dest.parent.mkdir()
    shutil.copy(src, dest)
    shutil.copy(f"{src}-wal", f"{dest}-wal")
    store.close()
    keep.close()
    return dest


def _frame_size(wal: Path) -> int:
    return 24 + struct.unpack(">I", wal.read_bytes()[8:12])[0]


def _read_all(path: Path) -> dict[str, Any]:
    store = Store(f"sqlite:///{path}")
    try:
        return {k: e.value for k, e in store.snapshot().items()}
    finally:
        store.close()


def test_an_intact_wal_opens_with_every_write(tmp_path: Path) -> None:
    path = _store_with_wal(tmp_path)
    assert find_damage(f"{path}-wal") is None
    assert _read_all(path) == {f"k{i}": 1000 + i for i in range(WRITER)}


def test_a_flipped_wal_frame_followed_by_committed_frames_is_refused(tmp_path: Path) -> None:
    path = _store_with_wal(tmp_path)
    wal = Path(f"{path}-wal")
    size = _frame_size(wal)
    frames = (wal.stat().st_size - 32) // size
    assert frames > 20
    data = bytearray(wal.read_bytes())
    data[32 + 5 * size + 24 + 100] ^= 0x10  # a bit of frame 6's page
    wal.write_bytes(bytes(data))
    before = wal.read_bytes()
    with pytest.raises(CorruptionError) as err:
        _read_all(path)
    assert "frame 6" in str(err.value) and "-wal" in err.value.where
    assert wal.read_bytes() == before  # left untouched: nothing recovered, nothing dropped


def test_a_torn_tail_is_not_damage_and_opens_with_the_writes_before_it(tmp_path: Path) -> None:
    """A -wal cut inside its last frame, as a crash while writing it leaves: SQLite drops
    that transaction (it was never acknowledged) and the file opens."""
    path = _store_with_wal(tmp_path)
    wal = Path(f"{path}-wal")
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size - 100)
    got = _read_all(path)
    assert len(got) == WRITER - 1 and all(got[k] == 1000 + int(k[1:]) for k in got)


def test_damage_only_in_the_last_transaction_could_be_a_crash_and_opens(tmp_path: Path) -> None:
    """A bad frame that only its own transaction's frames follow is what a power loss during
    that commit can leave; it is not refused (docs/reliability.md says so)."""
    path = _store_with_wal(tmp_path)
    wal = Path(f"{path}-wal")
    size = _frame_size(wal)
    data = bytearray(wal.read_bytes())
    data[-size + 24 + 100] ^= 0x10  # the last frame: the last transaction's commit frame
    wal.write_bytes(bytes(data))
    assert len(_read_all(path)) == WRITER - 1


def test_a_bit_flipped_in_a_store_value_is_refused_not_served(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(f"sqlite:///{path}")
    store.write("plain", 1)
    store.write("marked", MARK)
    store.close()
    assert _read_all(path) == {"plain": 1, "marked": MARK}
    _flip_in_file(path, MARK.encode(), copies=2)  # the value and its change in the log
    store = Store(f"sqlite:///{path}")
    try:
        assert store.read("plain").value == 1  # an undamaged key is still served
        with pytest.raises(CorruptionError) as err:
            store.read("marked")
        assert "key 'marked'" in err.value.where and "sf_state" in err.value.where
        with pytest.raises(CorruptionError):
            store.snapshot()
    finally:
        store.close()
    states = SQLiteStateStore(SQLiteDB(str(path)))
    with pytest.raises(CorruptionError):  # not merged into either
        states.merge("marked", "max", "5", author="a", trust="trusted", now=1.0)
    states.db.close()


def test_check_quick_refuses_a_damaged_file_at_open_and_a_bad_value_is_a_config_error(
    tmp_path: Path,
) -> None:
    """A database file cut short whose pages all have newer copies in the -wal serves every
    write without an error (the damage is not read); ``?check=quick`` (PRAGMA
    quick_check) finds it at open."""
    first = tmp_path / "first.db"
    store = Store(f"sqlite:///{first}")
    for i in range(WRITER):
        store.write(f"k{i}", i)
    store.close()  # checkpointed into the file
    path = _store_with_wal(tmp_path, start=first)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    assert _read_all(path) == {f"k{i}": 1000 + i for i in range(WRITER)}
    with pytest.raises(CorruptionError) as err:
        Store(f"sqlite:///{path}?check=quick")
    assert "quick_check" in err.value.where or "malformed" in err.value.where
    with pytest.raises(ConfigError):
        Store(f"sqlite:///{tmp_path / 'other.db'}?check=sometimes")


def test_a_run_whose_journal_is_damaged_needs_attention_not_a_claim_after_each_lease(
    tmp_path: Path,
) -> None:
    """A run resumed over a step row that fails its checksum is not claimed again and again
    (each claim meeting the same error until the lease ran out): it stops, needs_attention,
    with the damage in its audit."""
    path = tmp_path / "j.db"
    app = durable.App(f"sqlite:///{path}")

    @app.step
    async def emit() -> str:
        return MARK

    @app.workflow
    async def flow() -> int:
        await emit()
        await app.wait_for("go", timeout=3600)
        return 1

    app.start(flow, run_id="r")
    for _ in range(200):
        if app.journal.get_run("r").status == "waiting":
            break
        time.sleep(0.05)
    app.close()
    _flip_in_file(path, MARK.encode())
    again = durable.App(f"sqlite:///{path}")
    again.step(emit)
    again.workflow(flow)
    try:
        again.signal("r", "go", None)
        with pytest.raises(RunFailedError) as info:
            again.resume("r").result(timeout=30)
        assert info.value.status == "needs_attention"
        assert again.journal.get_run("r").status == "needs_attention"
        # the audit, read directly (show() reads the steps too, and refuses the damaged one)
        parked = [a.detail for a in again.journal.audit_log("r") if a.action == "needs_attention"]
        assert len(parked) == 1 and '"corruption"' in parked[0]
        assert "step '1' of run 'r'" in parked[0]
    finally:
        again.close()

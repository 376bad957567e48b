"""A SQLite journal pre-sizes its ``-wal``: the first 1,000 commits write into space the
file has (a commit that extends it costs ~1.6x, ``benchmarks/bench_sqlite_ceiling.py``),
and a SIGKILL loses no acknowledged step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from surefoot import durable, storage
from surefoot.errors import ConfigError

FRAMES = 1_000
PAGE = 4096
WANT = 32 + FRAMES * (PAGE + 24)


def _wal(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


def test_a_new_journal_has_its_wal_presized_and_steps_do_not_grow_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    app = durable.App(f"sqlite:///{path}", poll=0.01)

    @app.step
    async def work(i: int) -> int:
        return i

    @app.workflow
    async def many(n: int) -> int:
        for i in range(n):
            await work(i)
        return n

    try:
        app.journal  # noqa: B018 - opening makes the journal
        assert _wal(path) == WANT
        assert app.start(many, 100, run_id="r").result(timeout=60) == 100
        assert _wal(path) == WANT  # 100 steps wrote into the space the -wal already had
    finally:
        app.close()


def test_only_a_new_journal_is_presized_and_it_can_be_turned_off(tmp_path: Path) -> None:
    """Opening a journal that exists (a CLI reading it, a second process) adds nothing."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    first = storage.open(url)
    first.journal()
    second = storage.open(url)
    second.journal()
    assert first.db.presized > 0 and second.db.presized == 0
    assert _wal(tmp_path / "a.db") == WANT
    first.close()
    second.close()
    again = storage.open(url)
    again.journal()
    assert again.db.presized == 0
    again.close()
    off = storage.open(f"sqlite:///{tmp_path / 'b.db'}?wal_presize=0")
    off.journal()
    assert off.db.presized == 0 and _wal(tmp_path / "b.db") < WANT
    off.close()
    with pytest.raises(ConfigError, match="wal_presize must be whole frames"):
        storage.open(f"sqlite:///{tmp_path / 'c.db'}?wal_presize=lots")


CHILD = """
import sys
from surefoot import durable

app = durable.App(sys.argv[1], poll=0.01)


@app.step
async def work(i: int) -> str:
    return "x" * 200 + str(i)


@app.workflow
async def many(n: int) -> int:
    for i in range(n):
        await work(i)
        print(i, flush=True)  # acknowledged: the step's result is committed
    return n


app.start(many, 100_000, run_id="r").result(timeout=600)
"""


def test_sigkill_of_a_presized_journal_loses_no_acknowledged_step(tmp_path: Path) -> None:
    """Killed after 1,500 acknowledged steps (past the first checkpoint, where SQLite
    writes the -wal again from its start over its old frames and the zeros)."""
    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), url],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked = -1
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        while acked < 1_500 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        assert acked >= 1_500, f"the child acknowledged only {acked + 1} steps"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.stdout is not None
    for line in proc.stdout:  # what it acknowledged between our last read and the kill
        acked = int(line)
    proc.stdout.close()
    app = durable.App(url)
    try:
        done = {int(s.pos) for s in app.show("r").steps if s.status == "done"}
    finally:
        app.close()
    assert acked >= 1_500
    assert [i for i in range(acked + 1) if i + 1 not in done] == []  # step i is at pos i+1


def test_a_presize_past_any_use_is_refused_before_a_file_is_made(tmp_path: Path) -> None:
    # ?wal_presize=99999999999 raised a bare MemoryError (the zeros were built in memory)
    # and left a new, half-made journal file behind
    path = tmp_path / "big.db"
    with pytest.raises(ConfigError, match="99999999999"):
        storage.open(f"sqlite:///{path}?wal_presize=99999999999")
    assert not path.exists()

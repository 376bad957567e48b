"""Journal contract, the listings: filtered pages and counts of runs, the (workflow,
version) pairs, the workers seen, and the read-only probe ``storage.journal_missing``.

Each test runs on SQLite and PostgreSQL with the same answers; a reference computed in
Python from every run checks the pages of a seeded random journal.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import durable, storage
from surefoot.errors import ConfigError
from surefoot.storage.runs import RunRow

JOURNAL_BACKENDS = ["sqlite", "postgresql"]
STATUSES = ["pending", "running", "sleeping", "succeeded", "failed", "needs_attention"]
PAIRS = [("orders", "1"), ("orders", "2"), ("digest", "1")]


@pytest.fixture(params=JOURNAL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh storage URL on each journal backend (a scratch schema on PostgreSQL)."""
    return backend_url(request.param, tmp_path, request, "listing")


@pytest.fixture
def journal(url: str) -> Iterator[Any]:
    """The journal of ``url`` holding 240 seeded runs (some sharing a creation time)."""
    st = storage.open(url)
    j = st.journal()
    rng = random.Random(7)
    for i in range(240):
        wf, version = rng.choice(PAIRS)
        created = float(rng.randrange(60))  # ties: the run id decides
        status = rng.choice(STATUSES)
        j.create_run(
            RunRow(f"run-{i:03d}-{wf}", wf, version, "h", "[]", "journal", status, created, created)
        )
    yield j
    st.close()


def _reference(rows: list[RunRow], **f: Any) -> list[RunRow]:
    out = [
        r
        for r in rows
        if (f.get("status") is None or r.status == f["status"])
        and (f.get("workflow") is None or r.workflow == f["workflow"])
        and (f.get("version") is None or r.version == f["version"])
        and (f.get("since") is None or r.created_at >= f["since"])
        and (not f.get("search") or f["search"] in r.run_id)
    ]
    out.sort(key=lambda r: (-r.created_at, r.run_id))
    return out


FILTERS: list[dict[str, Any]] = [
    {},
    {"status": "needs_attention"},
    {"workflow": "orders", "version": "2"},
    {"since": 30.0},
    {"search": "digest"},
    {"search": "-01"},
    {"status": "pending", "workflow": "digest", "since": 10.0},
    {"status": "cancelled"},
]


@pytest.mark.parametrize("f", FILTERS)
def test_page_runs_and_count_runs_match_a_scan(journal: Any, f: dict[str, Any]) -> None:
    """Every page in both orders and the counts per status equal a Python scan of all runs."""
    every = journal.page_runs(limit=1000)
    assert len(every) == 240
    want = _reference(every, **f)
    attention = sorted(want, key=lambda r: r.status != "needs_attention")  # stable
    for order, expect in (("newest", want), ("attention", attention)):
        got: list[str] = []
        for offset in range(0, 260, 25):
            page = journal.page_runs(**f, order=order, offset=offset, limit=25)
            assert len(page) == len(expect[offset : offset + 25])
            got += [r.run_id for r in page]
        assert got == [r.run_id for r in expect], order
    assert journal.count_runs(**f) == dict(Counter(r.status for r in want))


def test_page_rows_are_whole_and_old_list_runs_agrees(journal: Any) -> None:
    """A page returns full rows (arguments, claims) and the first page equals list_runs."""
    page = journal.page_runs(status="pending", limit=5)
    assert [r.run_id for r in page] == [
        r.run_id for r in journal.list_runs(status="pending", limit=5)
    ]
    assert page[0] == journal.get_run(page[0].run_id)


def test_run_versions_are_the_distinct_pairs(journal: Any) -> None:
    """run_versions lists each (workflow, version) of the runs once, sorted."""
    assert journal.run_versions() == sorted(PAIRS)


def test_bad_order_offset_or_limit_is_refused(journal: Any) -> None:
    """An unknown order, a negative offset or a zero limit raise ConfigError naming it."""
    with pytest.raises(ConfigError, match="unknown run order 'oldest'"):
        journal.page_runs(order="oldest")
    with pytest.raises(ConfigError, match="offset=-1"):
        journal.page_runs(offset=-1)
    with pytest.raises(ConfigError, match="limit=0"):
        journal.page_runs(limit=0)


def test_workers_lists_each_worker_with_its_leases(url: str) -> None:
    """workers() names each registered worker, its versions, last seen and unexpired leases."""
    st = storage.open(url)
    try:
        j = st.journal()
        j.register_worker("w-b", [("orders", "2"), ("orders", "1")], now=5.0)
        j.register_worker("w-a", [("digest", "1")], now=7.0)
        for i in range(3):
            j.create_run(RunRow(f"r{i}", "orders", "1", "h", "[]", "journal", "pending", 1.0, 1.0))
        j.claim("w-b", now=8.0, lease_until=20.0, workflows=[("orders", "1")], limit=2)
        j.claim("w-a", now=8.0, lease_until=9.0, workflows=[("orders", "1")], limit=1)
        rows = j.workers(now=10.0)  # w-a's lease ran out at 9
        assert [(w.worker_id, w.workflows, w.seen_at, w.leases) for w in rows] == [
            ("w-a", [("digest", "1")], 7.0, 0),
            ("w-b", [("orders", "1"), ("orders", "2")], 5.0, 2),
        ]
    finally:
        st.close()


def test_app_lists_counts_and_pages_through_the_journal(url: str) -> None:
    """App.list_runs pages with offset/search/order; App.count_runs fills every status."""
    app = durable.App(url)

    @app.workflow(name="wf", version="3")
    def wf(x: int) -> int:
        return x

    try:
        for i in range(7):
            app.enqueue("wf", i, run_id=f"job-{i}")
        ids = [r.run_id for r in app.list_runs(order="attention", offset=2, limit=3)]
        assert len(ids) == 3 and set(ids) <= {f"job-{i}" for i in range(7)}
        assert [r.run_id for r in app.list_runs(search="job-4")] == ["job-4"]
        counts = app.count_runs(version="3")
        assert counts["pending"] == 7 and set(counts) == set(durable.STATUSES)
        assert sum(app.count_runs(version="9").values()) == 0
        assert app.run_versions() == [("wf", "3")]
    finally:
        app.close()


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _schema_exists(url: str) -> bool:
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", 1)[0]) as c:
        found = c.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        )
        return found.fetchone() is not None


def test_journal_missing_creates_nothing(url: str, tmp_path: Path) -> None:
    """The probe reports a missing journal without creating its file or schema, then finds
    the journal once one is opened there."""
    why = storage.journal_missing(url) or ""
    if url.startswith("sqlite"):
        assert "does not exist" in why
        assert list(tmp_path.iterdir()) == []
    else:
        assert "has no surefoot tables" in why
        assert not _schema_exists(url)
    st = storage.open(url)
    st.journal()
    st.close()
    assert storage.journal_missing(url) is None


def test_sqlite_probe_leaves_the_file_byte_for_byte(tmp_path: Path) -> None:
    """Probing a closed journal file changes no byte and leaves no -wal/-shm; probing one a
    live connection holds changes no byte of the file or its -wal and adds no file."""
    path = tmp_path / "j.db"
    url = f"sqlite:///{path}"
    st = storage.open(url)
    st.journal()
    st.close()
    before = _digest(tmp_path)
    assert list(before) == ["j.db"]
    assert storage.journal_missing(url) is None
    assert _digest(tmp_path) == before
    live = storage.open(url)
    live.journal().create_run(RunRow("r", "w", "1", "h", "[]", "journal", "pending", 1.0, 1.0))
    try:
        held = _digest(tmp_path)
        assert sorted(held) == ["j.db", "j.db-shm", "j.db-wal"]
        assert storage.journal_missing(url) is None
        after = _digest(tmp_path)  # the -shm is shared memory: every reader marks it
        assert sorted(after) == sorted(held)
        assert (after["j.db"], after["j.db-wal"]) == (held["j.db"], held["j.db-wal"])
    finally:
        live.close()
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.close()
    plain = _digest(tmp_path)
    assert "has no surefoot journal in it (its tables: t)" in (
        storage.journal_missing(f"sqlite:///{other}") or ""
    )
    assert _digest(tmp_path) == plain

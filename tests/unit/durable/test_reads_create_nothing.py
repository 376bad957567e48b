"""Looking at runs creates nothing: no PostgreSQL schema, no SQLite file.

A read of a URL that holds no journal is refused with one line that says so; the
PostgreSQL cases check ``information_schema.schemata`` afterwards for the (unique) schema.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from surefoot import durable
from surefoot.cli import main
from surefoot.errors import ConfigError


def _schema_exists(pg_url: str, schema: str) -> bool:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return row is not None


@pytest.fixture
def absent_schema(pg_url: str) -> Iterator[str]:
    """A schema name nobody has made (dropped after, in case a read made it)."""
    pytest.importorskip("psycopg")
    schema = f"sf_absent_{uuid.uuid4().hex[:10]}"
    yield schema
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_app_reads_on_postgres_create_no_schema(pg_url: str, absent_schema: str) -> None:
    """list_runs, show and count_runs refuse in one line; the schema is still absent."""
    app = durable.App(f"{pg_url}?schema={absent_schema}")
    try:
        reads = (app.list_runs, app.count_runs, lambda: app.show("r1"), app.stranded)
        acts = (lambda: app.handle("r1"), lambda: app.cancel("r1"), lambda: app.signal("r1", "x"))
        for read in (*reads, *acts):
            with pytest.raises(ConfigError) as err:
                read()
            assert "holds no durable journal" in str(err.value)
            assert "\n" not in str(err.value)
    finally:
        app.close()
    assert not _schema_exists(pg_url, absent_schema)


@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["runs", "show", "r1"], ["queues"], ["schedules"]],
)
def test_cli_reads_on_postgres_create_no_schema(
    pg_url: str, absent_schema: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``surefoot runs list --db postgresql://…`` on an absent schema: one line, exit 1."""
    with pytest.raises(SystemExit) as ex:
        main([*command, "--db", f"{pg_url}?schema={absent_schema}"])
    assert ex.value.code == 1
    err = capsys.readouterr().err.strip()
    assert "no durable journal" in err and absent_schema in err
    assert len(err.splitlines()) == 1
    assert not _schema_exists(pg_url, absent_schema)


def test_reads_work_once_a_run_made_the_journal(pg_url: str, absent_schema: str) -> None:
    """The refusal is only for an absent journal: after a run, the same reads answer."""
    url = f"{pg_url}?schema={absent_schema}"
    with durable.App(url, poll=0.01) as app:

        @app.workflow
        def hello() -> str:
            return "hi"

        app.start(hello, run_id="r1").result(timeout=10)
    with durable.App(url) as reader:
        assert [r.run_id for r in reader.list_runs()] == ["r1"]


def test_app_reads_on_a_missing_sqlite_file_create_no_file(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    app = durable.App(f"sqlite:///{path}")
    with pytest.raises(ConfigError, match="holds no durable journal"):
        app.list_runs()
    app.close()
    assert not os.path.exists(path)
    assert os.listdir(tmp_path) == []

"""The terminal, fixed where users tripped: runs list never cuts ids, names or states (at 80
columns or piped), a file that is not a journal is refused untouched, and resuming a finished
run says nothing was resumed. (The lab's output: tests/lab/test_lab_cli.py.)"""

from __future__ import annotations

import hashlib
import io
import re
import sqlite3
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from surefoot.cli import main
from surefoot.cli._runs import runs_table
from surefoot.durable import App
from surefoot.statebus import Store

ANSI = re.compile(r"\x1b\[[0-9;]*m")
IDS = [hashlib.md5(f"run-{i}".encode()).hexdigest() for i in range(3)]  # uuid4().hex-sized
WORKFLOW = "research_agent"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout without colour codes, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, ANSI.sub("", out.out), out.err


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable module 'name:app' with a long-named workflow and a failing one."""
    name = f"term_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            from surefoot import durable
            app = durable.App(poll=0.01, worker_id="worker-host-1234-abcdef")

            @app.workflow
            def {WORKFLOW}(x: int) -> int:
                return x

            def unbook(booking: str, *, key: str | None = None) -> None:
                raise RuntimeError("the booking service refuses to cancel")

            @app.step(effect=True, compensate=unbook, compensate_retry=1)
            def book(*, key: str | None = None) -> str:
                return "booking-1"

            @app.workflow
            def stuck() -> None:
                book()
                raise ValueError("then the run failed, and the undo failed too")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}:app"
    sys.modules.pop(name, None)


@pytest.fixture
def db(tmp_path: Path, app_module: str) -> str:
    """A journal with three long-id pending runs, one succeeded and one needs_attention."""
    import importlib

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    mod = importlib.import_module(app_module.split(":")[0])
    app: App = mod.app
    app.configure(url=url)
    wf = app.registry.resolve(WORKFLOW)
    for i, rid in enumerate(IDS):
        app.enqueue(wf, i, run_id=rid)
    app.start(wf, 9, run_id="finished").result(timeout=10)
    handle = app.start("stuck", run_id="attention")
    try:
        handle.result(timeout=10)
    except Exception:
        pass
    app.close()
    return url


def test_runs_list_on_an_80_column_terminal_keeps_ids_names_and_states(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns optional columns go first; every id, workflow and state is whole."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    code, out, _ = run_cli(capsys, "runs", "list", "--db", db)
    assert code == 0 and "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    for rid in IDS:
        (line,) = [x for x in out.splitlines() if rid in x]
        assert WORKFLOW in line and "pending" in line
    assert "needs_attention" in out and "strategy" not in out


def test_runs_list_piped_never_cuts_and_json_is_unchanged(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped at COLUMNS=80 each run is one whole line; --json still has every field."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "runs", "list", "--db", db)
    assert code == 0 and "…" not in out
    for rid in IDS:
        assert any(rid in x and WORKFLOW in x and "pending" in x for x in out.splitlines())
    code, text, _ = run_cli(capsys, "runs", "list", "--db", db, "--json")
    import json

    rows = json.loads(text)
    assert {r["run_id"] for r in rows} == {*IDS, "finished", "attention"}
    assert {"run_id", "workflow", "version", "status", "strategy", "owner", "epoch"} <= set(rows[0])


def test_runs_list_piped_keeps_owner_epoch_and_strategy(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (not a terminal) at COLUMNS=80: no column is dropped, the table is as wide as
    it needs (a file has no right edge)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "runs", "list", "--db", db)
    assert code == 0 and err == ""
    (header,) = [x for x in out.splitlines() if "workflow" in x and "status" in x]
    for column in ("run", "updated", "version", "owner", "epoch", "strategy"):
        assert column in header


def test_a_narrow_terminal_folds_the_id_and_keeps_the_state_whole(db: str) -> None:
    """At 40 columns the run id folds onto more lines, every character kept; states whole."""
    app = App(db)
    try:
        rows = app.journal.list_runs()
    finally:
        app.close()
    table, need = runs_table(rows, 40)
    out = io.StringIO()
    Console(file=out, width=40, force_terminal=False).print(table)
    text = out.getvalue()
    assert need > 40 and "…" not in text
    assert "needs_attention" in text and "succeeded" in text
    cells = "".join(line.split("│")[1].strip() for line in text.splitlines() if "│" in line)
    for rid in IDS:
        assert rid in cells


def test_optional_columns_are_dropped_strategy_first(db: str) -> None:
    """Wide: all eight columns; a little narrower: strategy goes before anything else."""
    app = App(db)
    try:
        rows = app.journal.list_runs()
    finally:
        app.close()
    wide, need = runs_table(rows, 300)
    assert [c.header for c in wide.columns] == [
        "run",
        "workflow",
        "status",
        "updated",
        "version",
        "owner",
        "epoch",
        "strategy",
    ]
    narrower, _ = runs_table(rows, need - 1)
    assert [c.header for c in narrower.columns][-1] == "epoch"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["cancel", "x"]])
def test_a_statebus_file_is_refused_and_left_untouched(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """runs on a statebus file: one line saying what it holds, exit 1, no table added."""
    path = tmp_path / "bus.db"
    store = Store(f"sqlite:///{path}")
    store.write("k", {"v": 1}, author="system")
    store.close()
    before = _digest(path)
    code, _, err = run_cli(capsys, "runs", *command, "--db", f"sqlite:///{path}")
    assert code == 1 and err.count("\n") == 1
    assert "is not a durable journal" in err and "statebus shared state" in err
    assert _digest(path) == before
    con = sqlite3.connect(path)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert not any(n.startswith("durable_") for n in names)


def test_a_text_file_is_refused_as_not_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not SQLite at all: one line, exit 1, the file unchanged."""
    path = tmp_path / "notes.db"
    path.write_text("these are notes, not a database\n" * 100)
    code, _, err = run_cli(capsys, "runs", "list", "--db", f"sqlite:///{path}")
    assert code == 1 and "is not a SQLite database" in err
    assert path.read_text().startswith("these are notes")


def test_resume_of_a_finished_run_says_nothing_was_resumed(
    db: str, app_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resuming a succeeded run: exit 0, 'nothing was resumed', no resume in the audit log."""
    code, out, _ = run_cli(capsys, "runs", "resume", "finished", "--db", db, "--app", app_module)
    assert code == 0 and "has already ended (succeeded); nothing was resumed" in out
    code, out, _ = run_cli(
        capsys, "runs", "resume", "finished", "--db", db, "--app", app_module, "--json"
    )
    import json

    assert json.loads(out) == {
        "run_id": "finished",
        "action": "none",
        "resumed": False,
        "status": "succeeded",
    }
    app = App(db)
    try:
        assert all(a.action != "resume" for a in app.show("finished").audit)
    finally:
        app.close()


def test_resume_of_a_run_needing_attention_points_at_retry(
    db: str, app_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resuming a needs_attention run: exit 1, nothing resumed, and the retry command."""
    code, _, err = run_cli(capsys, "runs", "resume", "attention", "--db", db, "--app", app_module)
    assert code == 1 and "nothing was resumed" in err and "surefoot runs retry attention" in err

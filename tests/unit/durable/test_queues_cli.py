"""The CLI of the workload: `surefoot queues`, `schedules`, `runs prune`, `runs children`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surefoot import FakeClock
from surefoot.cli import main
from surefoot.cli._workload import parse_age
from surefoot.durable import App, Worker
from surefoot.errors import ConfigError


def _journal(tmp_path: Path) -> tuple[App, str]:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    app = App(url, clock=FakeClock(), poll=0.01)

    @app.workflow
    def job(i: int) -> int:
        return i

    @app.workflow
    def parent() -> int:
        return int(app.child(job, 7))

    app.queue("mail", concurrency=2, rate=(5, 60.0))
    for i in range(3):
        app.enqueue(job, i, queue="mail", run_id=f"m{i}")
    app.schedule("nightly", job, cron="0 3 * * *", args=(1,))
    app.start(parent, run_id="p").result(timeout=10)
    Worker(app).run_once(timeout=10)
    return app, url


def test_queues_and_schedules_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`surefoot queues --json` shows limits and counts; `schedules --json` the cron."""
    app, url = _journal(tmp_path)
    app.close()
    main(["queues", "--db", url, "--json"])
    (q,) = json.loads(capsys.readouterr().out)
    assert (q["queue"], q["concurrency"], q["rate"]) == ("mail", 2, [5, 60.0])
    assert q["runs"] == {"succeeded": 2, "pending": 1}
    main(["schedules", "--db", url, "--json"])
    (s,) = json.loads(capsys.readouterr().out)
    assert (s["schedule"], s["workflow"], s["cron"], s["catchup"]) == (
        "nightly",
        "job",
        "0 3 * * *",
        "latest",
    )
    main(["queues", "--db", url])
    assert "mail" in capsys.readouterr().out


def test_runs_children_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`runs children` lists a parent's child; `runs prune --keep 0` deletes finished runs."""
    app, url = _journal(tmp_path)
    app.close()
    main(["runs", "children", "p", "--db", url, "--json"])
    assert json.loads(capsys.readouterr().out) == [
        {"run_id": "p:1", "workflow": "job", "status": "succeeded"}
    ]
    main(["runs", "prune", "--db", url, "--keep", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert sorted(out["pruned"]) == ["m0", "m1", "p", "p:1"]
    main(["runs", "list", "--db", url, "--json"])
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["m2"]


def test_prune_needs_a_bound_and_a_readable_age(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --keep nor --older-than, or an age like '7 days': one clear line, exit 1."""
    app, url = _journal(tmp_path)
    app.close()
    for args in ([], ["--older-than", "7 days"]):
        with pytest.raises(SystemExit) as info:
            main(["runs", "prune", "--db", url, *args])
        assert info.value.code == 1
        assert "surefoot: error:" in capsys.readouterr().err
    assert parse_age("7d") == 7 * 86400 and parse_age("90") == 90
    with pytest.raises(ConfigError):
        parse_age("soon")


APP_FILE = """
from surefoot import durable

app = durable.App("sqlite://")

@app.workflow
def job(i: int) -> int:
    return i
"""


def test_worker_prunes_with_its_retention_options(tmp_path: Path) -> None:
    """`surefoot worker --prune-keep 1` runs what is pending, then keeps one finished run."""
    (tmp_path / "ret_app.py").write_text(APP_FILE)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ref = f"{tmp_path / 'ret_app.py'}:app"
    producer = App(url)

    @producer.workflow
    def job(i: int) -> int:
        return i

    for i in range(3):
        producer.enqueue(job, i, run_id=f"r{i}")
    main(["worker", "--db", url, "--app", ref, "--idle-exit", "0.5", "--poll", "0.02",
          "--prune-keep", "1", "--prune-every", "0"])  # fmt: skip
    left = producer.list_runs()
    assert len(left) == 1 and left[0].status == "succeeded"
    producer.close()

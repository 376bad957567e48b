"""``surefoot worker`` and the async face of the API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from surefoot.cli import main
from surefoot.durable import App, load_app
from surefoot.errors import ConfigError

APP_FILE = """
from surefoot import durable

app = durable.App("sqlite://")

@app.step
def double(x: int) -> int:
    return 2 * x

@app.workflow
def twice(x: int) -> int:
    return double(double(x))
"""


def test_worker_command_runs_pending_runs(tmp_path: Path) -> None:
    """`surefoot worker --db … --app file.py:app --idle-exit` runs what is pending, then exits."""
    (tmp_path / "wf_app.py").write_text(APP_FILE)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ref = f"{tmp_path / 'wf_app.py'}:app"
    producer = load_app(ref)
    producer.configure(url=url)
    for i in range(3):
        producer.enqueue("twice", i, run_id=f"r{i}")
    main(["worker", "--db", url, "--app", ref, "--idle-exit", "0.3", "--poll", "0.02"])
    assert [producer.handle(f"r{i}").result(timeout=1) for i in range(3)] == [0, 4, 8]
    producer.close()


def test_worker_command_bad_app_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong --app reference exits 1 with one line saying what to pass."""
    with pytest.raises(SystemExit) as info:
        main(["worker", "--db", f"sqlite:///{tmp_path / 'r.db'}", "--app", "no_such_module:app"])
    assert info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("surefoot: error:") and "no_such_module" in err
    assert len(err.splitlines()) == 1


def test_load_app_refuses_what_is_not_an_app(tmp_path: Path) -> None:
    """load_app names the problem: bad reference, or an object that is not an App."""
    (tmp_path / "not_app.py").write_text("app = 42\n")
    with pytest.raises(ConfigError, match="module:app"):
        load_app("nocolon")
    with pytest.raises(ConfigError, match=r"not a surefoot\.durable\.App"):
        load_app(f"{tmp_path / 'not_app.py'}:app")


def test_start_from_async_code(app: App) -> None:
    """Inside a running event loop, start() returns at once and aresult() awaits the run."""

    @app.step
    async def hello(name: str) -> str:
        await asyncio.sleep(0)
        return f"hello {name}"

    @app.workflow
    async def greet(name: str) -> str:
        return await hello(name)

    async def main_() -> str:
        h = app.start(greet, "ann", run_id="a")
        return str(await h.aresult(timeout=10))

    assert asyncio.run(main_()) == "hello ann"


def test_worker_max_claims_parks_a_run_that_keeps_killing_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--max-claims 2` parks a run claimed twice before (two dead holders); show prints claims."""
    import time

    (tmp_path / "mc_app.py").write_text(APP_FILE)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ref = f"{tmp_path / 'mc_app.py'}:app"
    producer = load_app(ref)
    producer.configure(url=url)
    producer.enqueue("twice", 1, run_id="k")
    for _ in range(2):  # two holders that died at once: their leases are already over
        now = time.time()
        got = producer.journal.claim(
            "dead", now=now, lease_until=now - 1, workflows=producer.registered(), limit=1
        )
        assert [r for r, _ in got] == ["k"]
    args = ["worker", "--db", url, "--app", ref, "--idle-exit", "0.3", "--poll", "0.02"]
    main([*args, "--max-claims", "2"])
    run = producer.show("k").run
    assert (run.status, run.claims) == ("needs_attention", 3)
    assert producer.show("k").audit[-1].detail["reason"] == "max_claims"
    capsys.readouterr()
    main(["runs", "show", "k", "--db", url])
    assert "claims 3" in capsys.readouterr().out
    producer.retry("k")
    main(args)  # the default (10) lets it run after the operator's retry
    assert producer.handle("k").result(timeout=1) == 4
    producer.close()


COUNTING_APP = """
import os
from surefoot import durable

app = durable.App("sqlite://")
LOG = os.environ["SUREFOOT_TEST_LOG"]

@app.step
def work(x: int) -> int:
    with open(LOG, "a") as f:  # one line per execution, whichever worker runs it
        f.write(f"{durable.current_run().run_id} {os.getpid()}\\n")
    return 2 * x

@app.workflow
def job(x: int) -> int:
    return work(x)
"""


def test_two_worker_processes_on_postgres_share_runs_without_double_work(
    pg_url: str, tmp_path: Path
) -> None:
    """Two `surefoot worker --concurrency 2` processes on one PostgreSQL journal run every
    run exactly once between them."""
    import os
    import subprocess
    import sys
    import uuid

    from surefoot import storage

    (tmp_path / "count_app.py").write_text(COUNTING_APP)
    log = tmp_path / "executions.log"
    env = {**os.environ, "SUREFOOT_TEST_LOG": str(log)}
    os.environ["SUREFOOT_TEST_LOG"] = str(log)  # for the producer's import of the module
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    ref = f"{tmp_path / 'count_app.py'}:app"
    producer = load_app(ref)
    producer.configure(url=url)
    try:
        for i in range(12):
            producer.enqueue("job", i, run_id=f"p{i}")
        cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app", ref]
        cmd += ["--concurrency", "2", "--idle-exit", "1.0", "--poll", "0.05"]
        procs = [subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
        for p in procs:
            assert p.wait(timeout=60) == 0
        assert [producer.handle(f"p{i}").result(timeout=1) for i in range(12)] == [
            2 * i for i in range(12)
        ]
        lines = log.read_text().split()
        runs = lines[0::2]
        assert sorted(runs) == sorted(f"p{i}" for i in range(12))  # each exactly once
    finally:
        os.environ.pop("SUREFOOT_TEST_LOG", None)
        producer.close()
        st: Any = storage.open(url)
        st.db.drop_schema()
        st.close()

"""`make unit` runs the suite on pytest-xdist workers: a module's fixture is built once and
the files of tests/local_llm share one worker (tests/xdist_scheduling.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SHARED = """
import os, pytest

@pytest.fixture(scope="module")
def built():
    with open(os.environ["LOG"], "a") as f:
        f.write("built " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(4))
def test_shared(built, i):
    pass
"""

LOCAL = """
import os, time, pytest

@pytest.mark.parametrize("i", range(3))
def test_local(i):
    time.sleep(0.3)  # so the other worker asks for work while this file runs
    with open(os.environ["LOG"], "a") as f:
        f.write("local " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_module_fixture_once_and_shared_dir_on_one_worker(tmp_path: Path) -> None:
    """Two workers: a module-scoped fixture used by four tests is built once, and the two
    files of tests/local_llm run on one worker (handed out file by file, the second would
    go to the worker that finished first)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    tests = tmp_path / "tests"
    (tests / "local_llm").mkdir(parents=True)
    (tests / "conftest.py").write_text('pytest_plugins = ["xdist_scheduling"]\n')
    (tests / "test_shared.py").write_text(SHARED)
    (tests / "local_llm" / "test_a.py").write_text(LOCAL)
    (tests / "local_llm" / "test_b.py").write_text(LOCAL)
    log = tmp_path / "log"
    # only xdist: the other installed plugins would double the workers' start-up
    env = {**os.environ, "LOG": str(log), "PYTHONPATH": str(TESTS)}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    argv = ["-q", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2", "--dist", "loadfile"]
    r = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "10 passed" in r.stdout
    lines = log.read_text().splitlines()
    assert len([x for x in lines if x.startswith("built ")]) == 1
    local = [x.split()[1] for x in lines if x.startswith("local ")]
    assert len(local) == 6 and len(set(local)) == 1, local

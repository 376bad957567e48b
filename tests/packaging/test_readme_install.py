"""The README's git install line works with the pip a fresh venv brings (no upgrade first).

The line is read from README.md (so the doc and the test cannot drift), its placeholder path
replaced by a git clone of this checkout, and run as printed in a venv made by ``python -m
venv`` with its stock pip (23.2.1 on Python 3.11, which refuses ``git+file:///…``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/path/to/surefoot"

pytestmark = pytest.mark.slow


def readme_git_line() -> str:
    """The README's ``pip install "surefoot[cli] @ git+…"`` line, without its comment."""
    text = (ROOT / "README.md").read_text()
    (line,) = re.findall(r'^(pip install "surefoot\[cli\] @ git\+[^"]+")', text, flags=re.M)
    return line


def _run(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        shell=isinstance(cmd, str),
    )


def test_the_readme_git_line_installs_with_a_fresh_venvs_pip(tmp_path: Path) -> None:
    line = readme_git_line()
    assert PLACEHOLDER in line, line
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    clone = tmp_path / "surefoot"
    done = _run(["git", "clone", "-q", str(ROOT), str(clone)], tmp_path, env)
    assert done.returncode == 0, done.stderr
    venv = tmp_path / "venv"
    done = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)  # stock pip
    assert done.returncode == 0, done.stderr
    pip = _run([str(venv / "bin" / "python"), "-m", "pip", "--version"], tmp_path, env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    ran = _run(line.replace(PLACEHOLDER, str(clone)), tmp_path, env)
    assert ran.returncode == 0, f"{pip.stdout.strip()}: {ran.stderr[-2000:]}"
    helped = _run([str(venv / "bin" / "surefoot"), "--help"], tmp_path, env)
    assert helped.returncode == 0 and "runs" in helped.stdout, helped.stderr

"""The built wheel is the product: it installs into a fresh venv outside the repo and works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """surefoot's wheel, built from this checkout by pip (hatchling backend)."""
    out = tmp_path_factory.mktemp("dist")
    done = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT, cwd=out)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("surefoot-*.whl")
    return built


def test_wheel_holds_the_package_only(wheel: Path) -> None:
    """The wheel carries py.typed and the package, and no tests, benchmarks or bytecode."""
    names = zipfile.ZipFile(wheel).namelist()
    assert "surefoot/py.typed" in names
    assert "surefoot/__init__.py" in names
    top = {n.split("/", 1)[0] for n in names}
    assert all(t == "surefoot" or t.startswith("surefoot-") for t in top), top
    assert not [n for n in names if n.endswith((".pyc", ".db")) or "/tests/" in n], names


def test_wheel_installs_and_runs_outside_the_repo(wheel: Path, tmp_path: Path) -> None:
    """A fresh venv with the wheel and [cli] runs the README's examples and `surefoot --help`."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    done = _run(py, "-m", "pip", "install", "-q", f"{wheel}[cli]", cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    work = tmp_path / "work"
    work.mkdir()
    where = _run(py, "-c", "import surefoot, sys; print(surefoot.__file__)", cwd=work)
    assert where.returncode == 0, where.stderr
    assert str(env_dir) in where.stdout  # imported from the venv, not from this checkout

    readme = (ROOT / "README.md").read_text()
    example = "\n".join(re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M))
    (work / "example.py").write_text(example + "\napp.close()\nprint('example ok')\n")
    ran = _run(py, "example.py", cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("example ok")

    cli = _run(env_dir / "bin" / "surefoot", "--help", cwd=work)
    assert cli.returncode == 0, cli.stderr
    assert "lab" in cli.stdout and "runs" in cli.stdout

"""The built wheel is the product: it installs into a fresh venv outside the repo and works.

It holds no lab module and no lab dependency, and its ``surefoot`` has no lab commands; the
lab's own wheel (``lab/``) installs beside it and adds ``surefoot lab``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _build(project: Path, out: Path, pattern: str) -> Path:
    done = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, project, cwd=out
    )
    assert done.returncode == 0, done.stderr
    (built,) = out.glob(pattern)
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """surefoot's wheel, built from this checkout by pip (hatchling backend)."""
    return _build(ROOT, tmp_path_factory.mktemp("dist"), "surefoot-*.whl")


@pytest.fixture(scope="module")
def lab_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab's wheel (surefoot_lab), built from lab/ in this checkout."""
    return _build(ROOT / "lab", tmp_path_factory.mktemp("dist-lab"), "surefoot_lab-*.whl")


def _metadata(wheel: Path) -> tuple[list[str], list[str]]:
    """(Requires-Dist lines, Provides-Extra names) of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = HeaderParser().parsestr(z.read(name).decode())
    return meta.get_all("Requires-Dist") or [], meta.get_all("Provides-Extra") or []


def _commands(help_text: str) -> set[str]:
    """The command names a click ``--help`` lists under "Commands:"."""
    listed = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in listed.splitlines() if line.startswith("  ")}


def _venv(where: Path, *install: str | Path) -> Path:
    """A fresh venv at ``where`` with ``install`` pip-installed; its bin folder."""
    venv.create(where, with_pip=True)
    done = _run(where / "bin" / "python", "-m", "pip", "install", "-q", *install, cwd=where.parent)
    assert done.returncode == 0, done.stderr
    return where / "bin"


def test_wheel_holds_the_package_only(wheel: Path) -> None:
    """The wheel carries py.typed and the package, and no tests, benchmarks or bytecode."""
    names = zipfile.ZipFile(wheel).namelist()
    assert "surefoot/py.typed" in names
    assert "surefoot/__init__.py" in names
    top = {n.split("/", 1)[0] for n in names}
    assert all(t == "surefoot" or t.startswith("surefoot-") for t in top), top
    assert not [n for n in names if n.endswith((".pyc", ".db")) or "/tests/" in n], names
    assert not [n for n in names if n.startswith("surefoot/lab/") or "surefoot_lab" in n]


def test_wheel_depends_on_nothing_of_the_lab(wheel: Path) -> None:
    """No extra of the product's wheel pulls in the lab's dependencies (DBOS, AgentDojo,
    llama.cpp), and the lab's extras are not the product's."""
    requires, extras = _metadata(wheel)
    assert requires, "the product's extras are listed"
    lab_only = ("dbos", "agentdojo", "llama-cpp-python", "llama_cpp_python", "surefoot-lab")
    assert not [r for r in requires if r.lower().startswith(lab_only)], requires
    assert not {"engines", "dbos", "agentdojo", "local-llm"} & set(extras), extras
    assert {"cli", "postgres", "redis", "temporal", "ui", "otel"} <= set(extras), extras


def test_lab_wheel_is_the_lab_on_the_product(lab_wheel: Path) -> None:
    """The lab's wheel holds surefoot_lab only, requires surefoot, and carries the lab's extras."""
    names = zipfile.ZipFile(lab_wheel).namelist()
    assert "surefoot_lab/__init__.py" in names
    assert not [n for n in names if n.startswith("surefoot/")], names
    requires, extras = _metadata(lab_wheel)
    assert any(r.startswith("surefoot[") for r in requires), requires
    assert {"dbos", "agentdojo", "local-llm"} <= set(extras), extras


def test_wheel_installs_and_runs_outside_the_repo(wheel: Path, tmp_path: Path) -> None:
    """A fresh venv with the wheel and [cli] runs the README's examples and `surefoot --help`."""
    env_dir = tmp_path / "venv"
    py = _venv(env_dir, f"{wheel}[cli]") / "python"

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
    commands = _commands(cli.stdout)
    # `chaos` is the product's (it runs the user's own app); `lab` comes only with the lab
    assert {"runs", "worker", "chaos"} <= commands and "lab" not in commands, commands
    lab = _run(env_dir / "bin" / "surefoot", "lab", "list", cwd=work)
    assert lab.returncode == 2 and "No such command 'lab'" in lab.stderr


def test_lab_wheel_installs_beside_the_product(
    wheel: Path, lab_wheel: Path, tmp_path: Path
) -> None:
    """Both wheels in a fresh venv: `surefoot --help` offers `lab`, and `surefoot lab list` and
    `surefoot-lab list` list the experiments, from the venv, outside the repository."""
    bin_dir = _venv(tmp_path / "venv", f"{wheel}[cli]", lab_wheel)
    work = tmp_path / "work"
    work.mkdir()
    helped = _run(bin_dir / "surefoot", "--help", cwd=work)
    assert helped.returncode == 0, helped.stderr
    assert "lab" in _commands(helped.stdout)
    for argv in ([bin_dir / "surefoot", "lab"], [bin_dir / "surefoot-lab"]):
        listed = _run(*argv, "list", "--json", cwd=work)
        assert listed.returncode == 0, listed.stderr
        assert '"id": "resilience.waits"' in listed.stdout
    where = _run(
        bin_dir / "python", "-c", "import surefoot_lab; print(surefoot_lab.__file__)", cwd=work
    )
    assert str(tmp_path / "venv") in where.stdout

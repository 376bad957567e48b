"""The CLI's contract: version, lab listing, and one clear line for a SurefootError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from surefoot.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version."""
    main(["--version"])
    assert "0.1.0" in capsys.readouterr().out


def test_unknown_experiment_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    """A SurefootError becomes one line on stderr and exit code 1, no traceback."""
    with pytest.raises(SystemExit) as info:
        main(["lab", "run", "no.such.experiment"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("surefoot: error: no lab experiment 'no.such.experiment'")
    assert "Traceback" not in err and err.count("\n") == 1


def test_python_dash_m_works() -> None:
    """python -m surefoot runs the same CLI."""
    out = subprocess.run(
        [sys.executable, "-m", "surefoot", "--help"], capture_output=True, text=True, check=True
    )
    assert "lab" in out.stdout


def test_public_all_is_complete() -> None:
    """Every name in a public module's __all__ exists (ruff's RUF022 keeps them sorted)."""
    import importlib
    import pkgutil

    import surefoot

    for mod in pkgutil.walk_packages(surefoot.__path__, "surefoot."):
        if any(part.startswith("_") for part in mod.name.split(".")) or ".cli" in mod.name:
            continue
        m = importlib.import_module(mod.name)
        names = getattr(m, "__all__", None)
        if names is not None:
            for n in names:
                assert hasattr(m, n), f"{mod.name}.__all__ names missing {n}"


def test_report_path_in_a_missing_folder_fails_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--json/--md into a folder that does not exist is refused up front, in one line."""
    target = tmp_path / "nope" / "x.json"
    with pytest.raises(SystemExit) as info:
        main(["lab", "run", "resilience.waits", "--json", str(target)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert err.count("\n") == 1
    assert not target.parent.exists()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_seeds_below_one_are_refused(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    """--seeds must be at least 1."""
    with pytest.raises(SystemExit) as info:
        main(["lab", "run", "resilience.waits", "--seeds", bad])
    assert info.value.code == 2
    assert "--seeds" in capsys.readouterr().err


def test_lab_run_writes_reports(tmp_path: Path) -> None:
    """A run writes the JSON and Markdown reports it was asked for, labelled with the model."""
    import json

    j, m = tmp_path / "r.json", tmp_path / "r.md"
    main(["lab", "run", "resilience.waits", "--json", str(j), "--md", str(m)])
    doc = json.loads(j.read_text())
    assert doc["experiments"][0]["id"] == "resilience.waits"
    assert doc["experiments"][0]["facts"]
    assert "resilience.waits" in m.read_text()

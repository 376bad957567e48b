"""The CLI's contract: version, ``python -m surefoot``, and one clear line for a SurefootError."""

from __future__ import annotations

import subprocess
import sys

import pytest

from surefoot.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version."""
    main(["--version"])
    assert "0.1.0" in capsys.readouterr().out


def test_python_dash_m_works() -> None:
    """python -m surefoot runs the same CLI."""
    out = subprocess.run(
        [sys.executable, "-m", "surefoot", "--help"], capture_output=True, text=True, check=True
    )
    assert "runs" in out.stdout and "worker" in out.stdout


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

"""The docs stay true: every CLI command is documented and has help text (the product's, and
the lab's when it is installed), and every lab experiment appears in docs/exercises.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from surefoot.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def _commands(cmd: click.Command, path: str) -> list[tuple[str, click.Command]]:
    out = [(path, cmd)]
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            out += _commands(sub, f"{path} {name}")
    return out


def _lab_cli() -> click.Group:
    lab_cli = pytest.importorskip("surefoot_lab.cli", reason="the lab is not installed")
    group: click.Group = lab_cli.lab
    return group


@pytest.mark.parametrize("which", ["product", "lab"])
def test_every_command_has_help_text(which: str) -> None:
    """No command of the product's CLI, nor of the lab's, is left without a help line."""
    root = cli if which == "product" else _lab_cli()
    for path, cmd in _commands(root, "surefoot" if which == "product" else "surefoot lab"):
        assert (cmd.help or "").strip(), f"{path} has no help text"
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                assert (p.help or "").strip() or p.name in ("help", "version"), (
                    f"{path} option {p.opts} has no help"
                )


def test_cli_reference_is_current() -> None:
    """docs/cli.md is what scripts/gen_cli_docs.py generates from the app."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_experiment_is_in_exercises_md() -> None:
    """Each lab id is mapped to its exercise in docs/exercises.md."""
    lab = pytest.importorskip("surefoot_lab", reason="the lab is not installed")
    text = (ROOT / "docs" / "exercises.md").read_text()
    missing = [e.id for e in lab.experiments() if f"`{e.id}`" not in text and e.id not in text]
    assert not missing, f"docs/exercises.md does not mention {missing}"


def test_docs_index_links_exist() -> None:
    """Every page docs/index.md links to exists."""
    import re

    text = (ROOT / "docs" / "index.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert (ROOT / "docs" / target).exists(), f"docs/index.md links missing {target}"


@pytest.mark.parametrize("page", ["durable.md", "statebus.md"])
def test_the_schema_option_is_on_every_page_that_opens_postgres(page: str) -> None:
    """Each page whose subsystem runs on PostgreSQL says what ``?schema=`` does (a
    paragraph names the option and its default), not only docs/scale-out.md."""
    paragraphs = (ROOT / "docs" / page).read_text().split("\n\n")
    assert any("?schema=" in p and "default `surefoot`" in p for p in paragraphs)

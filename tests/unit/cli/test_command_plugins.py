"""Commands other distributions add through the entry-point group ``surefoot.commands``: listed
and run beside the product's, never replacing one, and a broken one says why in one line
without taking the other commands down."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import click
import pytest

from surefoot.cli import COMMANDS_GROUP, cli, run_command
from surefoot.cli._plugins import PluginGroup
from surefoot.errors import ConfigError


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable module with a click group ``extra``, an object ``not_a_command``, and a
    command ``runs`` (the name of a product command)."""
    name = f"sf_plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            '''
            import click

            @click.group()
            def extra():
                """Extra things from another distribution."""

            @extra.command()
            def hello():
                """Say hello."""
                click.echo("hello from the plugin")

            @click.command()
            def runs():
                """A plugin's own runs."""
                click.echo("the plugin's runs")

            not_a_command = 42
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _group(monkeypatch: pytest.MonkeyPatch, *eps: tuple[str, str]) -> PluginGroup:
    """A ``surefoot``-like group with one product command, ``runs``, and these entry points."""
    found = [EntryPoint(name, value, "test.commands") for name, value in eps]

    def entry_points(*, group: str) -> list[EntryPoint]:
        assert group == "test.commands"
        return found

    monkeypatch.setattr("surefoot.cli._plugins.entry_points", entry_points)

    @click.command("runs")
    def product_runs() -> None:
        """The product's runs."""
        click.echo("the product's runs")

    group = PluginGroup("surefoot", entry_point_group="test.commands")
    group.add_command(product_runs)
    return group


def _run(
    group: click.Command, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """Run ``group`` as ``surefoot`` runs; (exit code, stdout, stderr)."""
    try:
        run_command(group, list(args), prog_name="surefoot")
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_installed_command_is_listed_and_runs(
    plugin_module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry point's group appears in --help beside the product's and runs by its name."""
    group = _group(monkeypatch, ("extra", f"{plugin_module}:extra"))
    code, out, _ = _run(group, capsys, "--help")
    assert code == 0 and "extra" in out and "Extra things from another" in out and "runs" in out
    assert _run(group, capsys, "extra", "hello") == (0, "hello from the plugin\n", "")


def test_a_plugin_cannot_replace_a_product_command(
    plugin_module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry point named like a product command is ignored: the product's command runs."""
    group = _group(monkeypatch, ("runs", f"{plugin_module}:runs"))
    assert _run(group, capsys, "runs") == (0, "the product's runs\n", "")
    assert group.list_commands(click.Context(group)) == ["runs"]


def test_a_plugin_that_fails_to_import_is_listed_with_the_reason_and_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--help still works and says why; running it (any arguments) is one line, exit 1;
    the product's commands are untouched."""
    group = _group(monkeypatch, ("broken", "sf_no_such_module_anywhere:cli"))
    code, out, _ = _run(group, capsys, "--help")
    assert code == 0 and "broken" in out and "could not be loaded" in out
    code, out, err = _run(group, capsys, "broken", "run", "--all", "--help")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "the command 'broken'" in err and "sf_no_such_module_anywhere:cli" in err
    assert "ModuleNotFoundError" in err and "Reinstall that distribution" in err
    assert _run(group, capsys, "runs") == (0, "the product's runs\n", "")


def test_an_entry_point_that_is_not_a_click_command_says_so(
    plugin_module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry point naming something other than a click command: one line naming its type."""
    group = _group(monkeypatch, ("odd", f"{plugin_module}:not_a_command"))
    code, _, err = _run(group, capsys, "odd")
    assert code == 1 and err.count("\n") == 1
    assert "is a int, not a click command" in err and "click.Command or click.Group" in err


def test_run_command_turns_a_surefoot_error_into_one_line_named_after_the_program(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """run_command: a SurefootError is '<prog>: error: …' on stderr and exit code 1."""

    @click.command()
    def bad() -> None:
        """Always refuses."""
        raise ConfigError("seeds must be >= 1, got 0")

    with pytest.raises(SystemExit) as info:
        run_command(bad, [], prog_name="my-tool")
    assert info.value.code == 1
    assert capsys.readouterr().err == "my-tool: error: seeds must be >= 1, got 0\n"


def test_the_product_cli_has_no_lab_of_its_own() -> None:
    """`lab` is not a product command: it comes only from an entry point. The product's
    `chaos` runs the user's own app (`--app`), not the lab's demo agent."""
    assert "lab" not in cli.commands
    assert "--app" in [opt for p in cli.commands["chaos"].params for opt in p.opts]
    assert isinstance(cli, PluginGroup) and cli.entry_point_group == COMMANDS_GROUP == (
        "surefoot.commands"
    )

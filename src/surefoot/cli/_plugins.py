"""Command groups that other distributions add to ``surefoot``, found by entry point.

A distribution declares a click command (usually a group) in the entry-point group
``surefoot.commands``; its name there is the command's name::

    [project.entry-points."surefoot.commands"]
    lab = "surefoot_lab.cli:lab"

The product's commands come first: an entry point cannot replace one. A command is imported
only when it is run or listed (``surefoot --help``), so a broken one costs the other
commands nothing. One that fails to load is listed with the reason, and running it prints
that reason as one line and exits 1.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

import click

__all__ = ["COMMANDS_GROUP", "PluginGroup"]

COMMANDS_GROUP = "surefoot.commands"
"""The entry-point group whose click commands ``surefoot`` adds to its own."""


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    by = f"{dist.metadata['Name']} {dist.version}, " if dist is not None else ""
    return f"{by}entry point {ep.name} = {ep.value} in group {ep.group!r}"


def _broken(name: str, short: str, reason: str) -> click.Command:
    """A stand-in listed in ``--help``; running it (with any arguments) says why it failed."""

    def fail() -> None:
        raise click.ClickException(reason)

    return click.Command(
        name,
        callback=fail,
        help=f"Not available: {reason}",
        short_help=f"(could not be loaded: {short})",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


class PluginGroup(click.Group):
    """A click group that also offers the commands installed under an entry-point group."""

    def __init__(self, *args: Any, entry_point_group: str = COMMANDS_GROUP, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entry_point_group = entry_point_group
        self._found: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, click.Command] = {}

    def _plugins(self) -> dict[str, EntryPoint]:
        """Installed entry points by name, those shadowed by a product command left out."""
        if self._found is None:
            found: dict[str, EntryPoint] = {}
            for ep in entry_points(group=self.entry_point_group):
                if ep.name not in self.commands:
                    found.setdefault(ep.name, ep)
            self._found = found
        return self._found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        ep = self._plugins().get(cmd_name)
        if ep is None:
            return None
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = self._load(cmd_name, ep)
        return self._loaded[cmd_name]

    def _load(self, name: str, ep: EntryPoint) -> click.Command:
        try:
            command = ep.load()
        except Exception as exc:  # any error in someone else's module: say which, go on
            error = f"{type(exc).__name__}: {exc}"
            return _broken(
                name,
                error,
                f"the command {name!r} ({_origin(ep)}) failed to import: "
                f"{error}. Reinstall that distribution, or uninstall it "
                "to drop the command",
            )
        if not isinstance(command, click.Command):
            kind = type(command).__name__
            return _broken(
                name,
                f"{kind}, not a click command",
                f"the command {name!r} ({_origin(ep)}) is a {kind}, not a "
                "click command; the entry point must name a click.Command or click.Group",
            )
        return command

"""Write docs/cli.md from the click apps themselves, so the CLI reference cannot drift.

Usage: python scripts/gen_cli_docs.py [--check]
``--check`` exits 1 if docs/cli.md differs from what the apps generate (a test runs it).

Two parts: the product's ``surefoot`` (its own commands only, whatever is installed), then
the lab's ``surefoot lab`` (the lab's distribution, ``lab/``). Without the lab installed,
``--check`` checks the product's part and the lab's is left as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from surefoot.cli import cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
LAB_HEADING = "# The lab's commands"


def _walk(cmd: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    out = [(path, cmd)]
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            out += _walk(cmd.commands[name], [*path, name])
    return out


def _product_only(group: click.Group) -> click.Group:
    """``surefoot`` as the product ships it: its commands, none added by entry points."""
    return click.Group(
        group.name,
        commands=group.commands,
        params=group.params,
        help=group.help,
        context_settings=group.context_settings,
    )


def _sections(root: click.Command, path: list[str]) -> list[str]:
    lines: list[str] = []
    for sub, cmd in _walk(root, path):
        ctx = click.Context(cmd, info_name=" ".join(sub), terminal_width=100)
        lines += [f"## `{' '.join(sub)}`", "", "```text", cmd.get_help(ctx), "```", ""]
    return lines


def render_product() -> str:
    lines = [
        "# CLI reference",
        "",
        "Generated from the apps by `scripts/gen_cli_docs.py`; a test checks it is current.",
        "Every command accepts `-h/--help`. A `SurefootError` prints one line on stderr and",
        "exits 1; `python -m surefoot` is the same command. A command that waits for a run's",
        "end (`runs resume`, `runs retry --wait`, `runs fork --wait`, `engine start --wait`)",
        "exits 0 when it succeeded and 1 when it ended failed, cancelled or needs_attention,",
        "or had not ended when its wait (`--timeout`, `--wait SECONDS`) ran out (the error on",
        "stderr; `runs` commands print the run's status first).",
        "",
        "Other distributions add commands through the entry-point group `surefoot.commands`",
        "(`surefoot.cli.COMMANDS_GROUP`), as the lab adds `surefoot lab`",
        "([below](#the-labs-commands)):",
        "",
        "```toml",
        '[project.entry-points."surefoot.commands"]',
        'lab = "surefoot_lab.cli:lab"          # name = "module:click_command_or_group"',
        "```",
        "",
        "Such a command is imported only when it is run or listed; one that fails to import is",
        "listed with the reason and, run, prints it in one line (exit 1); a product command",
        "cannot be replaced. `surefoot.cli.run_command(group, prog_name=…)` runs the group as a",
        "script of its own with the same one-line errors, and `surefoot.cli.print_fitted` prints",
        "a rich table as `surefoot` does.",
        "",
        *_sections(_product_only(cli), ["surefoot"]),
    ]
    return "\n".join(lines)


def render_lab() -> str | None:
    """The lab's part, or None when the lab is not installed."""
    try:
        from surefoot_lab.cli import lab
    except ImportError:
        return None
    lines = [
        LAB_HEADING,
        "",
        "The lab is its own distribution (`lab/`, `surefoot-lab`); `pip install surefoot` does",
        "not install it. Installed (`pip install -e './lab[dbos]'` from the repository, as",
        "`make run` does), it adds `surefoot lab` through the entry-point group",
        "`surefoot.commands`, and the script `surefoot-lab` runs the same group",
        "(`surefoot-lab run all` is `surefoot lab run all`).",
        "",
        *_sections(lab, ["surefoot", "lab"]),
    ]
    return "\n".join(lines)


def main() -> int:
    product, lab = render_product(), render_lab()
    if "--check" in sys.argv:
        text = DOC.read_text() if DOC.exists() else ""
        have_product, _, have_lab = text.partition(LAB_HEADING)
        stale = have_product != product + "\n" or (
            lab is not None and LAB_HEADING + have_lab != lab
        )
        if stale:
            print("docs/cli.md is out of date: run python scripts/gen_cli_docs.py")
            return 1
        return 0
    if lab is None:
        print("install the lab too (pip install -e './lab[dbos]'): docs/cli.md documents both")
        return 1
    DOC.write_text(product + "\n" + lab)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Write docs/cli.md from the click app itself, so the CLI reference cannot drift.

Usage: python scripts/gen_cli_docs.py [--check]
``--check`` exits 1 if docs/cli.md differs from what the app generates (a test runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from surefoot.cli import cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def _walk(cmd: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    out = [(path, cmd)]
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            out += _walk(cmd.commands[name], [*path, name])
    return out


def render() -> str:
    lines = [
        "# CLI reference",
        "",
        "Generated from the app by `scripts/gen_cli_docs.py`; a test checks it is current.",
        "Every command accepts `-h/--help`. A `SurefootError` prints one line on stderr and",
        "exits 1; `python -m surefoot` is the same command.",
        "",
    ]
    for path, cmd in _walk(cli, ["surefoot"]):
        ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=100)
        lines += [f"## `{' '.join(path)}`", "", "```text", cmd.get_help(ctx), "```", ""]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/cli.md is out of date: run python scripts/gen_cli_docs.py")
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

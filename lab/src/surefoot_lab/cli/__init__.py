"""The lab's command line: ``surefoot lab …`` with the lab installed, or ``surefoot-lab …``.

One click group, ``lab``, registered in the product's entry-point group
``surefoot.commands`` (``lab/pyproject.toml``) and run on its own by the ``surefoot-lab``
script through :func:`surefoot.cli.run_command`: the same commands and the same one-line
errors either way.
"""

from __future__ import annotations

import click

from surefoot import telemetry
from surefoot.cli import run_command

from ._chaos import chaos
from ._experiments import list_, run

__all__ = ["lab", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="surefoot-lab", prog_name="surefoot-lab")
def lab() -> None:
    """The experiments that answer every exercise of the course material."""


lab.add_command(list_)
lab.add_command(run)
lab.add_command(chaos)


def main(argv: list[str] | None = None) -> None:
    """``surefoot-lab``: the ``lab`` group as a script, logging as ``surefoot lab`` does."""
    telemetry.configure_logging(level="WARNING", format="text")
    run_command(lab, argv, prog_name="surefoot-lab")

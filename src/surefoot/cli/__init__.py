"""The ``surefoot`` command. It parses, calls the public API and renders; it never decides.

A ``SurefootError`` becomes one line on stderr and exit code 1; any other exception is a bug
and keeps its traceback.

Other distributions add command groups through the entry-point group ``surefoot.commands``
(:data:`COMMANDS_GROUP`): the lab (``lab/``) adds ``surefoot lab`` that way. Such a command
may use :func:`run_command` to be a script of its own with the same error handling, and
:func:`print_fitted` to print rich tables the way ``surefoot`` does.
"""

from __future__ import annotations

import sys

import click

from .. import __version__, telemetry
from ..errors import SurefootError
from ._chaos import chaos
from ._engine import engine
from ._follow import follow
from ._plugins import COMMANDS_GROUP, PluginGroup
from ._provider import fake_provider
from ._render import print_fitted
from ._runs import runs
from ._ui import ui
from ._worker import worker
from ._workload import queues, schedules  # also adds `runs prune`, `runs children`

__all__ = ["COMMANDS_GROUP", "cli", "main", "print_fitted", "run_command"]


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="surefoot")
@click.option(
    "--log-format",
    type=click.Choice(telemetry.LOG_FORMATS),
    default=None,
    envvar="SUREFOOT_LOG_FORMAT",
    help="Log lines on stderr as text or JSON lines (env SUREFOOT_LOG_FORMAT).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    envvar="SUREFOOT_LOG_LEVEL",
    help="Lowest level logged: INFO for worker (a line per run event), else WARNING.",
)
@click.pass_context
def cli(ctx: click.Context, log_format: str | None, log_level: str | None) -> None:
    """Sure-footed LLM agents: resilient calls, durable runs, shared state."""
    level = log_level or ("INFO" if ctx.invoked_subcommand == "worker" else "WARNING")
    telemetry.configure_logging(level=level, format=log_format or "text")


cli.add_command(worker)
cli.add_command(runs)
runs.add_command(follow)
cli.add_command(ui)
cli.add_command(engine)
cli.add_command(fake_provider)
cli.add_command(queues)
cli.add_command(schedules)
cli.add_command(chaos)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; turn a SurefootError into one clear line and exit code 1."""
    run_command(cli, argv, prog_name="surefoot")


def run_command(command: click.Command, argv: list[str] | None = None, *, prog_name: str) -> None:
    """Run a click command as ``surefoot`` runs its own: a ``SurefootError`` becomes one line
    on stderr (``<prog_name>: error: …``) and exit code 1; any other exception keeps its
    traceback.

    Args:
        command: the command or group to run.
        argv: the arguments (``sys.argv[1:]`` when None).
        prog_name: the name shown in usage lines and before an error.
    """
    try:
        command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(130) from None
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except SurefootError as exc:  # every URL in it through the one redaction, whoever wrote it
        sys.stderr.write(f"{prog_name}: error: {telemetry.redact(str(exc))}\n")
        raise SystemExit(1) from None

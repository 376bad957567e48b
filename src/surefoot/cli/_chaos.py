"""``surefoot chaos``: your app's workflows in real workers, SIGKILLed at random, checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .. import storage
from ..errors import ConfigError

__all__ = ["chaos"]


def _inputs(value: str | None, path: Path | None, runs: int) -> list[Any] | None:
    if value is not None and path is not None:
        raise ConfigError(
            "--input and --inputs both given: pass one input for every run, or a file"
        )
    if value is not None:
        try:
            return [json.loads(value)] * runs
        except ValueError as exc:
            raise ConfigError(
                f"--input {value!r} is not JSON ({exc}); quote it, e.g. '[\"a\", 1]'"
            ) from None
    if path is None:
        return None
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise ConfigError(f"--inputs {str(path)!r} line {n} is not JSON ({exc})") from None
    if not out:
        raise ConfigError(f"--inputs {str(path)!r} holds no input: one JSON value per line")
    return out


@click.command("chaos")
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--workflow", required=True, help="The workflow to run.")
@click.option("--db", required=True, help="Journal URL (sqlite:///chaos.db, postgresql://…).")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(min=1), help="Runs.")
@click.option(
    "--input",
    "input_json",
    default=None,
    help="The arguments of every run, as JSON: a list (positional), an object (keywords) "
    "or one value.",
)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file of JSON lines, one run's arguments each (sets --runs).",
)
@click.option(
    "--workers", default=3, show_default=True, type=click.IntRange(min=1), help="Processes."
)
@click.option("--seed", default=0, show_default=True, help="Seeds the kill schedule.")
@click.option(
    "--max-kills", default=10, show_default=True, type=click.IntRange(min=0), help="SIGKILLs."
)
@click.option(
    "--kill-every",
    default="0.3:1.5",
    show_default=True,
    help="LOW:HIGH seconds: the random wait between two kills.",
)
@click.option(
    "--lease",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="The workers' lease, in seconds.",
)
@click.option(
    "--time-limit",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds before unfinished runs count as lost.",
)
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write the report here.")
def chaos(
    app_ref: str,
    workflow: str,
    db: str,
    runs: int,
    input_json: str | None,
    inputs_path: Path | None,
    workers: int,
    seed: int,
    max_kills: int,
    kill_every: str,
    lease: float,
    time_limit: float,
    json_path: Path | None,
) -> None:
    """Run your app's WORKFLOW under chaos before a deploy, and check every run.

    Enqueues --runs runs on --db, starts --workers `surefoot worker` processes, SIGKILLs a
    random one at seeded random moments (the first while it holds a run) and starts another
    in its place, until every run ends or --time-limit passes. Then checks that every run
    succeeded, that no step completed twice (from the workers' own log lines, written after
    each step's journal write), and that every run claimed again has its takeover in the
    audit log. Exits with status 1 if a check fails. Use a journal of its own: the runs it
    enqueues stay there for `surefoot runs show`.
    """
    low, sep, high = kill_every.partition(":")
    try:
        window = (float(low), float(high if sep else low))
    except ValueError:
        raise ConfigError(
            f"--kill-every {kill_every!r} is not LOW:HIGH seconds, e.g. 0.3:1.5"
        ) from None
    if not 0 < window[0] <= window[1]:
        raise ConfigError(
            f"--kill-every {kill_every!r} needs 0 < LOW <= HIGH seconds, e.g. 0.3:1.5"
        )
    if json_path is not None and (json_path.is_dir() or not json_path.parent.is_dir()):
        raise ConfigError(
            f"--json {str(json_path)!r} cannot be written: its folder does not exist (or it "
            "is a folder); give a file path in an existing folder"
        )
    from ..testing import run_chaos

    click.echo(
        f"chaos: {workflow} from {app_ref}, {workers} workers on {storage.redact(db)}", err=True
    )
    report = run_chaos(
        app_ref,
        workflow,
        db=db,
        runs=runs,
        inputs=_inputs(input_json, inputs_path, runs),
        workers=workers,
        seed=seed,
        max_kills=max_kills,
        kill_every=window,
        lease=lease,
        time_limit=time_limit,
    )
    rows = [
        ("runs succeeded", f"{report.succeeded}/{report.runs}"),
        ("SIGKILLs (holding a run)", f"{report.kills} ({report.kills_holding_a_run})"),
        ("runs claimed more than once", str(report.claimed_more_than_once)),
        (
            "steps journalled / logged done",
            f"{report.steps_journalled} / {report.steps_done_logged}",
        ),
        ("steps completed more than once", str(len(report.repeated_steps))),
        ("takeovers missing from the audit", str(len(report.unexplained_handovers))),
        ("seconds", f"{report.elapsed:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")
    for problem in report.problems:
        click.echo(f"  FAILED: {problem}", err=True)
    if json_path is not None:
        json_path.write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    click.echo("chaos: every check passed" if report.ok else "chaos: checks failed", err=True)
    if not report.ok:
        raise SystemExit(1)

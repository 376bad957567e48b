"""``surefoot lab chaos``: the demo agent in real workers, SIGKILLed, on a shared journal."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import click
from rich.console import Console

from surefoot import storage
from surefoot.errors import ConfigError

from .._registry import Table
from ._tables import rich_table

__all__ = ["chaos"]


@click.command("chaos")
@click.option("--db", required=True, help="Journal URL: postgresql://… (or sqlite:///file.db).")
@click.option("--workers", default=3, show_default=True, help="Worker processes.")
@click.option("--runs", default=300, show_default=True, help="Agent runs (journal_keys).")
@click.option("--seed", default=0, show_default=True, help="Seeds the kill schedule and model.")
@click.option(
    "--restart-server",
    "restart",
    is_flag=True,
    default=False,
    help="Also restart the PostgreSQL server once mid-run (opt-in: it cuts every client of "
    "that server; local pg_ctlcluster clusters only). A failed restart fails the check.",
)
@click.option("--no-restart", "no_restart", is_flag=True, hidden=True)  # the old default now
@click.option("--restart", "old_restart", is_flag=True, hidden=True)
@click.option(
    "--time-limit", default=240.0, show_default=True, help="Seconds before runs count as lost."
)
@click.option(
    "--max-kills", default=30, show_default=True, help="At most this many SIGKILLs (0: none)."
)
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write results here.")
def chaos(
    db: str,
    workers: int,
    runs: int,
    seed: int,
    restart: bool,
    no_restart: bool,
    old_restart: bool,
    time_limit: float,
    max_kills: int,
    json_path: Path | None,
) -> None:
    """Run the lab's demo agent under chaos and check every run.

    Starts WORKERS worker processes on the journal, SIGKILLs them at seeded random moments,
    restarts the PostgreSQL server once (bounded) only with --restart-server, and then
    checks completion, duplicate
    effects, model calls repeated for journalled steps, and each run's journal, audit log
    and effects. With --max-kills > 0 the first kill hits a worker as soon as it holds a run,
    and a run with no kill at all fails. Exits with status 1 if any check fails, including a
    requested server restart that failed or never happened.
    """
    if old_restart:
        raise ConfigError(
            "--restart is gone: restarting the server is opt-in now and spelled "
            "--restart-server (it cuts every client of that server)"
        )
    if restart and no_restart:
        raise ConfigError("--restart-server and --no-restart contradict each other; pick one")
    if json_path is not None:  # checked now, not after a run of several minutes
        folder = json_path.parent if str(json_path.parent) else Path(".")
        if not folder.is_dir():
            raise ConfigError(
                f"--json {str(json_path)!r}: folder {str(folder)!r} does not exist; create it "
                "or pick another path"
            )
        if not os.access(folder, os.W_OK):
            raise ConfigError(f"--json {str(json_path)!r}: folder {str(folder)!r} is not writable")
    if restart:  # the restart is on purpose: the pool's "error connecting" is expected noise
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    status = Console(stderr=True).status(
        f"chaos: {runs} runs, {workers} workers on {storage.redact(db)}"
    )
    with tempfile.TemporaryDirectory(prefix="surefoot-chaos-") as tmp, status:
        # Imported here so `surefoot --help` and `lab list` don't load the chaos harness.
        from ..durable.scaleout import chaos_run

        out = chaos_run(
            db,
            workers=workers,
            runs=runs,
            seed=seed,
            restart=restart,
            time_limit=time_limit,
            max_kills=max_kills,
            # the first kill hits a worker holding a run, so even a short run sees one
            kill_in_flight_first=max_kills > 0,
            workdir=tmp,
        )
    rep = out.report
    (r,) = rep.results

    t = Table(
        f"{r.runs} runs, {workers} workers, {rep.kills} SIGKILLs in {rep.elapsed:.1f} s; "
        f"server: {out.restart}",
        ["check", "result"],
    )
    t.add("completed", f"{r.completed}/{r.runs} ({r.completion_rate:.0%})")
    t.add("duplicate effects (posts)", r.duplicate_effects)
    t.add("model calls repeated after their step was journalled", r.repeated_after_journal)
    t.add("model calls repeated for steps in flight at a kill", r.repeated_model_calls)
    t.add("runs whose journal, audit log or effects disagree", len(out.inconsistent))
    restart_failed = out.restart_failed
    if restart:
        t.add(
            "server restart (--restart-server)",
            ("FAILED: " if restart_failed else "") + out.restart,
        )
    unkilled = max_kills > 0 and rep.kills == 0
    t.add(
        "SIGKILLs made (--max-kills > 0 needs at least one)",
        f"{rep.kills} of at most {max_kills}"
        + (": FAILED, nothing was tested" if unkilled else ""),
    )
    Console().print(rich_table(t))
    for p in out.problems:
        click.echo(f"  {p}", err=True)
    if restart_failed:
        click.echo(
            f"  the server restart asked for with --restart-server did not happen: "
            f"{out.restart}; the check fails (the workers never saw the server go away)",
            err=True,
        )
    if unkilled:
        click.echo(
            f"  no worker was SIGKILLed (--max-kills {max_kills}): the checks above saw no "
            "crash; run more --runs or a longer --time-limit",
            err=True,
        )
    ok = (
        r.completed == r.runs
        and r.duplicate_effects == 0
        and not r.repeated_after_journal
        and not out.inconsistent
        and not unkilled
        and not restart_failed
    )
    if json_path is not None:
        json_path.write_text(
            json.dumps(
                {
                    "ok": ok,
                    "runs": r.runs,
                    "completed": r.completed,
                    "duplicate_effects": r.duplicate_effects,
                    "repeated_after_journal": r.repeated_after_journal,
                    "repeated_model_calls": r.repeated_model_calls,
                    "inconsistent_runs": out.inconsistent,
                    "kills": rep.kills,
                    "max_kills": max_kills,
                    "restart": out.restart,
                    "restart_failed": restart_failed,
                    "elapsed_s": round(rep.elapsed, 2),
                    "params": rep.params,
                },
                indent=2,
            )
            + "\n"
        )
    if not ok:
        raise SystemExit(1)

"""``surefoot lab``: list and run the experiments."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from .. import lab as lab_api
from ..errors import ConfigError
from ._render import rich_table


def _console() -> Console:
    """A console that does not squeeze tables to 80 columns when output goes to a file."""
    c = Console()
    return c if c.is_terminal else Console(width=max(c.width, 160))


@click.group()
def lab() -> None:
    """The experiments that answer every exercise of the course material."""


@lab.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def list_(as_json: bool) -> None:
    """List experiment ids with their seed file and exercise."""
    exps = lab_api.experiments()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {"id": e.id, "seed_file": e.seed_file, "exercise": e.exercise, "title": e.title}
                    for e in exps
                ],
                indent=2,
            )
        )
        return
    from rich.table import Table

    t = Table(title="surefoot lab experiments", title_justify="left")
    for c in ("id", "seed file", "exercise", "what it shows"):
        t.add_column(c)
    for e in exps:
        t.add_row(e.id, e.seed_file, e.exercise, e.title)
    _console().print(t)


@lab.command("run")
@click.argument("ids", nargs=-1, required=True)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=None,
    help="Seeds to average over (default per experiment).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="First seed.")
@click.option("--db", default=None, help="Storage URL for experiments that support one.")
@click.option("--quick", is_flag=True, help="Smaller sizes (what the tests run).")
@click.option(
    "--llm",
    default="fake",
    show_default=True,
    metavar="fake|local|URL",
    help="The model: the seeded FakeLLM, the local SmolLM2 server (`make local-llm`), or an "
    "OpenAI-compatible API root such as http://127.0.0.1:8080/v1.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JSON report.",
)
@click.option(
    "--md",
    "md_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a Markdown report.",
)
def run(
    ids: tuple[str, ...],
    seeds: int | None,
    seed: int,
    db: str | None,
    quick: bool,
    llm: str,
    json_path: Path | None,
    md_path: Path | None,
) -> None:
    """Run experiments by id, by subsystem (resilience, durable, statebus) or 'all'."""
    chosen = lab_api.select(list(ids))
    for path in (json_path, md_path):  # fail before the work, not after it
        if path is not None and not path.resolve().parent.is_dir():
            raise ConfigError(
                f"cannot write a report to {str(path)!r}: folder {str(path.resolve().parent)!r} "
                "does not exist; create it or choose another path"
            )
    console = _console()
    results = []
    with (
        lab_api.lab_model(llm) as model,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress,
    ):
        overall = progress.add_task("lab", total=len(chosen))
        for exp in chosen:
            task = progress.add_task(f"  {exp.id}", total=None)

            def tick(done: int, total: int, task: TaskID = task) -> None:
                progress.update(task, completed=done, total=total)

            with lab_api.context(
                seeds=seeds, seed=seed, db=db, quick=quick, progress=tick, llm=model
            ) as ctx:
                res = exp.run(ctx)
            progress.remove_task(task)
            progress.advance(overall)
            results.append((exp, res))
            console.rule(f"[bold]{exp.id}[/bold]  {exp.title}")
            console.print(f"[dim]{exp.seed_file} · {exp.exercise} · model: {res.model}[/dim]")
            for t in res.tables:
                console.print(rich_table(t))
            if res.answer:
                console.print(f"[bold]Answer.[/bold] {res.answer}")
    if json_path:
        json_path.write_text(lab_api.to_json(results))
        console.print(f"wrote {json_path}")
    if md_path:
        md_path.write_text(lab_api.to_markdown(results))
        console.print(f"wrote {md_path}")

"""``surefoot lab list`` and ``surefoot lab run``: list and run the experiments."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

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
from rich.text import Text

from surefoot.cli import print_fitted
from surefoot.errors import ConfigError

from .._registry import Experiment, LabResult, context, experiments, select
from .._report import to_json, to_markdown
from ..local_model import lab_model, local_model_missing
from ._tables import rich_table

__all__ = ["PlainProgress", "list_", "run"]

Tick = Callable[[int, int], None]


def _console() -> Console:
    """The console: the terminal's width, or (piped) ``COLUMNS`` or 80.

    Tables wrap between words to fit; ``print_fitted`` widens piped output only for a
    table whose longest words do not fit.
    """
    return Console()


class PlainProgress:
    """Progress for piped output: plain lines on ``stream`` (stderr), never a live bar.

    A line when an experiment starts, one at most every ``every`` seconds while it reports
    progress, one every ``every`` seconds while it reports none ("still running"), and one
    when it ends with its duration.
    """

    def __init__(self, stream: IO[str] | None = None, every: float = 10.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every

    def _say(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    @contextmanager
    def experiment(self, exp_id: str, index: int, count: int) -> Iterator[Tick]:
        start = time.monotonic()
        state = {"said": start, "done": 0, "total": 0}
        lock = threading.Lock()
        stop = threading.Event()
        self._say(f"[{index}/{count}] {exp_id}: running")

        def tick(done: int, total: int) -> None:
            with lock:
                state["done"], state["total"] = done, total
                now = time.monotonic()
                if now - state["said"] >= self.every and done < total:
                    state["said"] = now
                    self._say(f"[{index}/{count}] {exp_id}: {done}/{total} ({now - start:.0f} s)")

        def beat() -> None:
            while not stop.wait(self.every / 4):
                with lock:
                    now = time.monotonic()
                    if now - state["said"] >= self.every:
                        state["said"] = now
                        got = f"{state['done']}/{state['total']}, " if state["total"] else ""
                        self._say(
                            f"[{index}/{count}] {exp_id}: still running ({got}{now - start:.0f} s)"
                        )

        watcher = threading.Thread(target=beat, name="surefoot-lab-progress", daemon=True)
        watcher.start()
        try:
            yield tick
        finally:
            stop.set()
            watcher.join()
            self._say(f"[{index}/{count}] {exp_id}: done in {time.monotonic() - start:.1f} s")


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def list_(as_json: bool) -> None:
    """List experiment ids with their seed file and exercise."""
    exps = experiments()
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
    for c in ("id", "seed file", "exercise"):
        t.add_column(c, no_wrap=True)  # ids and names are never split
    t.add_column("what it shows")
    for e in exps:
        t.add_row(e.id, e.seed_file, e.exercise, e.title)
    print_fitted(_console(), t)


@click.command("run")
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
    "--full",
    is_flag=True,
    help="The full sweep where an experiment runs a stated subset by default "
    "(statebus.agentdojo: every attack template, not one, and every suite through an MCP "
    "server).",
)
@click.option(
    "--llm",
    default="fake",
    show_default=True,
    metavar="fake|local|URL",
    help="The model: the seeded FakeLLM, the local SmolLM2 server (`make local-llm`; when it "
    "is not installed the experiments run on their own model and say so), or an "
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
    full: bool,
    llm: str,
    json_path: Path | None,
    md_path: Path | None,
) -> None:
    """Run experiments by id, by subsystem (resilience, durable, statebus) or 'all'."""
    if quick and full:
        raise ConfigError("--quick and --full contradict each other; pick one")
    chosen = select(list(ids))
    for path in (json_path, md_path):  # fail before the work, not after it
        if path is not None and not path.resolve().parent.is_dir():
            raise ConfigError(
                f"cannot write a report to {str(path)!r}: folder {str(path.resolve().parent)!r} "
                "does not exist; create it or choose another path"
            )
    console = _console()
    results: list[tuple[Experiment, LabResult]] = []

    def show(exp: Experiment, res: LabResult) -> None:
        # what an experiment says is shown as written, never read as markup (Text)
        console.rule(Text(exp.id, style="bold"))  # a rule would cut a long title: print it
        console.print(Text(exp.title, style="bold"))
        console.print(Text(f"{exp.seed_file} · {exp.exercise} · model: {res.model}", style="dim"))
        for t in res.tables:
            print_fitted(console, rich_table(t))
        if res.answer:
            console.print(Text.assemble(("Answer.", "bold"), " ", res.answer))

    # --llm local without the model: run on the experiments' own model, and say so (a lab
    # run is worth having without the 98 MB model; each answer names what was absent)
    why = local_model_missing() if llm.strip().lower() == "local" else None
    absent = None if why is None else f"the local model is absent ({why})"
    if absent is not None:
        click.echo(f"surefoot lab: --llm local: {absent}; running without it", err=True)
        llm = "fake"

    def one(exp: Experiment, tick: Tick) -> None:
        with context(
            seeds=seeds,
            seed=seed,
            db=db,
            quick=quick,
            full=full,
            progress=tick,
            llm=model,
            llm_absent=absent,
        ) as ctx:
            res = exp.run(ctx)
        results.append((exp, res))
        show(exp, res)

    # the local model server (--llm local) is started once and stopped by pid at the end
    with lab_model(llm) as model:
        if not console.is_terminal:  # piped: plain lines on stderr, the results on stdout
            plain = PlainProgress()
            for i, exp in enumerate(chosen, 1):
                with plain.experiment(exp.id, i, len(chosen)) as tick:
                    one(exp, tick)
        else:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            ) as progress:
                overall = progress.add_task("lab", total=len(chosen))
                for exp in chosen:
                    task = progress.add_task(f"  {exp.id}", total=None)

                    def tick(done: int, total: int, task: TaskID = task) -> None:
                        progress.update(task, completed=done, total=total)

                    one(exp, tick)
                    progress.remove_task(task)
                    progress.advance(overall)
    if json_path:
        json_path.write_text(to_json(results))
        console.print(f"wrote {json_path}")
    if md_path:
        md_path.write_text(to_markdown(results))
        console.print(f"wrote {md_path}")

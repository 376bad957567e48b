"""``surefoot runs follow RUN_ID``: print a run's token stream live, resumable by offset.

Tokens are printed as they come; a step's first attempt and every retry are announced on
a line of their own (a retry says the text above it, for that step, is void). When the run
ends (or on Ctrl-C) the last offset is printed on stderr: ``--after OFFSET`` resumes there,
after a dropped connection or a crash of this reader. ``--json`` prints one JSON object per
event (the same objects and offsets as the SSE endpoint's ``data:``).

Every value comes from a model or a tool, so none is trusted: control characters (terminal
escape sequences included) are shown escaped, never sent to the terminal.
"""

from __future__ import annotations

import re

import click
from rich.console import Console
from rich.markup import escape

from ..durable import StreamEvent
from ..errors import ConfigError
from ._runs import open_app

__all__ = ["follow", "printable"]

# C0 controls but tab and newline, DEL, and C1 controls: escape sequences start with these.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters shown as ``\\xNN`` (nothing a terminal acts on)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _marker(ev: StreamEvent) -> str | None:
    """The line announcing an attempt or its end, or None for a token or progress event."""
    where = f"step {escape(printable(ev.step))} (position {escape(printable(ev.pos))})"
    if ev.kind == "start":
        return f"[dim]── {where}[/dim]"
    if ev.kind == "retry":
        return (
            f"[bold yellow]── {where}: attempt {ev.attempt} (epoch {ev.epoch}); "
            "its text above is void[/bold yellow]"
        )
    if ev.kind == "end" and not (isinstance(ev.data, dict) and ev.data.get("ok")):
        return f"[red]── {where}: attempt {ev.attempt} failed[/red]"
    return None


@click.command("follow")
@click.argument("run_id")
@click.option("--db", required=True, help="Journal URL, e.g. sqlite:///runs.db.")
@click.option(
    "--after",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Resume after this offset (the last one you saw).",
)
@click.option("--no-follow", is_flag=True, help="Print what is stored now, then stop.")
@click.option(
    "--timeout",
    default=None,
    type=click.FloatRange(min=0),
    help="Stop after this many seconds.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.option(
    "--app",
    "app_ref",
    default=None,
    help="The App ('module:app') whose payload codec the events were stored with.",
)
def follow(
    run_id: str,
    db: str,
    after: int,
    no_follow: bool,
    timeout: float | None,
    as_json: bool,
    app_ref: str | None,
) -> None:
    """Print RUN_ID's token stream as its steps emit it, until the run ends."""
    try:
        _follow(run_id, db, after, no_follow, timeout, as_json, app_ref)
    except ConfigError as exc:
        if app_ref is None and "payload codec" in str(exc):
            raise ConfigError(f"{exc}: pass --app module:app, the App made with it") from None
        raise


def _follow(
    run_id: str,
    db: str,
    after: int,
    no_follow: bool,
    timeout: float | None,
    as_json: bool,
    app_ref: str | None,
) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    last = after
    with open_app(db, app_ref) as app:
        stream = app.handle(run_id).stream(after=after, follow=not no_follow, timeout=timeout)
        open_line = False
        try:
            for ev in stream:
                last = ev.offset
                if as_json:
                    click.echo(ev.to_json())
                    continue
                if ev.kind == "token":
                    click.echo(printable(ev.data), nl=False)
                    open_line = not ev.data.endswith("\n")
                    continue
                if ev.kind == "progress":
                    line = f"[dim]· {escape(printable(str(ev.data)))}[/dim]"
                else:
                    line = _marker(ev) or ""
                if line:
                    if open_line:
                        click.echo("")
                        open_line = False
                    err.print(line)
        except KeyboardInterrupt:
            pass
        finally:
            if open_line and not as_json:
                click.echo("")
            err.print(f"[dim]last offset {last} (resume with --after {last})[/dim]")

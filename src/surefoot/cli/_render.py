"""Turn lab tables and records into rich renderables, and print them without cutting cells."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table as RichTable

from ..lab import Table

_NUMBER = re.compile(r"^[-+−]?[\d,._]*\d[\d,._]*\s*(%|s|ms|µs|ns|x|×)?$")


def cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _numeric(values: list[Any]) -> bool:
    """True when every value of a column is a number (or blank, or a dash)."""
    seen = False
    for v in values:
        if isinstance(v, bool):
            return False
        if isinstance(v, int | float):
            seen = True
            continue
        text = str(v).strip()
        if text in ("", "-", "–", "—", "n/a"):
            continue
        if not _NUMBER.match(text):
            return False
        seen = True
    return seen


def rich_table(t: Table) -> RichTable:
    """A lab table: numbers right-aligned, prose left-aligned and wrapped between words."""
    rt = RichTable(
        title=t.title, title_justify="left", caption=t.note or None, caption_justify="left"
    )
    for i, c in enumerate(t.columns):
        values = [row[i] for row in t.rows if i < len(row)]
        right = i > 0 and _numeric(values)
        rt.add_column(c, justify="right" if right else "left", overflow="fold")
    for row in t.rows:
        rt.add_row(*(cell(v) for v in row))
    return rt


def print_fitted(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` so no cell is cut or split inside a word.

    Rich wraps cells between words when the console is narrower than the table. When even
    the longest words do not fit: on a terminal rich folds them (the terminal would break
    a longer line anyway); piped or redirected, the output is widened to what the table
    needs, since a file has no right edge.
    """
    if not console.is_terminal:
        need = Measurement.get(console, console.options, renderable).minimum
        if need > console.width:
            old = console.width
            console.width = need
            try:
                console.print(renderable)
            finally:
                console.width = old
            return
    console.print(renderable)

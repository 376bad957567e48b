"""Lab tables as rich tables: numbers right-aligned, prose left-aligned and wrapped."""

from __future__ import annotations

import re
from typing import Any

from rich.table import Table as RichTable
from rich.text import Text

from .._registry import Table

__all__ = ["cell", "rich_table"]

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
    """A lab table: numbers right-aligned, prose left-aligned and wrapped between words.

    Every text is shown as written, never read as rich markup: a cell saying
    ``pip install './lab[agentdojo]'`` keeps its ``[agentdojo]``, and text a tool or an agent
    produced cannot style the terminal.
    """
    rt = RichTable(
        title=Text(t.title),
        title_justify="left",
        caption=Text(t.note) if t.note else None,
        caption_justify="left",
    )
    for i, c in enumerate(t.columns):
        values = [row[i] for row in t.rows if i < len(row)]
        right = i > 0 and _numeric(values)
        rt.add_column(Text(c), justify="right" if right else "left", overflow="fold")
    for row in t.rows:
        rt.add_row(*(Text(cell(v)) for v in row))
    return rt

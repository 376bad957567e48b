"""Turn lab tables and records into rich renderables."""

from __future__ import annotations

from typing import Any

from rich.table import Table as RichTable

from ..lab import Table


def cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def rich_table(t: Table) -> RichTable:
    rt = RichTable(
        title=t.title, title_justify="left", caption=t.note or None, caption_justify="left"
    )
    for i, c in enumerate(t.columns):
        rt.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
    for row in t.rows:
        rt.add_row(*(cell(v) for v in row))
    return rt

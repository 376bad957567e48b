"""How values look on the pages: times, durations, and values folded but never cut.

Nothing here builds HTML: the templates do, with autoescape on, so every value from a run
or a store reaches the page as text.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Folded", "ago", "clock_time", "fold", "ms", "plain", "when"]

FOLD_CHARS = 240
FOLD_LINES = 6
SHORT_CHARS = 90


def plain(v: Any) -> Any:
    """A value as JSON can hold it (results may be any codec value)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if v is None or isinstance(v, str | int | float | bool):
        return v
    return repr(v)


@dataclass(frozen=True, slots=True)
class Folded:
    """A value's full text, and a one-line head of it when it is folded away."""

    text: str
    head: str
    folded: bool
    chars: int
    lines: int


def fold(v: Any) -> Folded:
    """The value as text; folded (head shown, the rest one click away) when it is large."""
    if isinstance(v, str):
        text = one = v
    else:
        one = json.dumps(plain(v), ensure_ascii=False)
        text = (
            one if len(one) <= SHORT_CHARS else json.dumps(plain(v), indent=2, ensure_ascii=False)
        )
    lines = text.count("\n") + 1
    folded = len(text) > FOLD_CHARS or lines > FOLD_LINES
    first = one.split("\n", 1)[0]
    cut = len(first) > SHORT_CHARS or "\n" in one
    head = first[:SHORT_CHARS] + ("…" if cut else "")
    return Folded(text, head, folded, len(text), lines)


def when(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def clock_time(t: float | None) -> str:
    """``12:15:26.123`` (UTC; the date is in the cell's title)."""
    if t is None:
        return "-"
    d = dt.datetime.fromtimestamp(t, dt.UTC)
    return d.strftime("%H:%M:%S.") + f"{d.microsecond // 1000:03d}"


def ago(t: float | None, now: float) -> str:
    """``3 min ago`` or ``in 2 h`` (the UTC time is in the cell's title)."""
    if t is None:
        return "-"
    d = now - t
    future = d < 0
    d = abs(d)
    if d < 60:
        s = f"{d:.0f} s"
    elif d < 3600:
        s = f"{d / 60:.0f} min"
    elif d < 86400:
        s = f"{d / 3600:.1f} h"
    else:
        s = f"{d / 86400:.1f} d"
    return f"in {s}" if future else f"{s} ago"


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{1000 * seconds:,.1f} ms"
    return f"{seconds:,.2f} s"


AGES = {"": None, "1h": 3600.0, "24h": 86400.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}
"""The runs page's age filter: created within this long."""

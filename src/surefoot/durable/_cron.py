"""Cron expressions, the five-field kind, in UTC (standard library only).

``minute hour day-of-month month day-of-week``; each field is ``*``, a number, a range
``a-b``, a step ``*/n`` or ``a-b/n``, or a comma list of those. Months and weekdays may be
named (``jan``, ``mon``); Sunday is 0 or 7. As in Vixie cron, when both day fields are
restricted a day matches if either does. Shorthands: ``@hourly``, ``@daily``
(``@midnight``), ``@weekly``, ``@monthly``, ``@yearly`` (``@annually``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Cron"]

_SHORT = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 7, {d: i for i, d in enumerate(_DAYS)}),
)


def _value(text: str, names: dict[str, int], what: str, expr: str) -> int:
    low = text.lower()
    if low in names:
        return names[low]
    if not low.isdigit():
        raise ConfigError(f"cron {expr!r}: {what} {text!r} is not a number or a name")
    return int(low)


def _field(text: str, what: str, lo: int, hi: int, names: dict[str, int], expr: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ConfigError(f"cron {expr!r}: {what} step {step_text!r} must be >= 1")
            step = int(step_text)
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            x, _, y = rng.partition("-")
            a, b = _value(x, names, what, expr), _value(y, names, what, expr)
        else:
            a = _value(rng, names, what, expr)
            b = hi if step_text else a
        if not lo <= a <= b <= hi:
            raise ConfigError(
                f"cron {expr!r}: {what} {part!r} is outside {lo}-{hi} (or its range is reversed)"
            )
        out.update(range(a, b + 1, step))
    return out


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression; ``next_after(t)`` is its first tick strictly after ``t``."""

    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expr: str) -> Cron:
        """Parse ``expr``.

        Raises:
            ConfigError: not five fields (or a known shorthand), or a field out of range.
        """
        if not isinstance(expr, str):
            raise ConfigError(f"a cron expression is a string, got {expr!r}")
        text = _SHORT.get(expr.strip().lower(), expr)
        parts = text.split()
        if len(parts) != 5:
            raise ConfigError(
                f"cron {expr!r} must have 5 fields (minute hour day-of-month month "
                "day-of-week), e.g. '0 3 * * *' for 03:00 UTC every day"
            )
        sets = [
            _field(p, f[0], f[1], f[2], f[3], expr) for p, f in zip(parts, _FIELDS, strict=False)
        ]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(
            expr,
            frozenset(sets[0]),
            frozenset(sets[1]),
            frozenset(sets[2]),
            frozenset(sets[3]),
            weekdays,
            parts[2] == "*",
            parts[4] == "*",
        )

    def _day_ok(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow

    def next_after(self, t: float) -> float:
        """The first tick strictly after clock time ``t`` (seconds since the epoch, UTC).

        Raises:
            ConfigError: the expression never matches (e.g. 31 February) within 5 years.
        """
        start = dt.datetime.fromtimestamp(t, dt.UTC).replace(second=0, microsecond=0)
        start += dt.timedelta(minutes=1)
        day = start.date()
        hours = sorted(self.hours)
        minutes = sorted(self.minutes)
        for _ in range(366 * 5):
            if self._day_ok(day):
                for h in hours:
                    for m in minutes:
                        at = dt.datetime(day.year, day.month, day.day, h, m, tzinfo=dt.UTC)
                        if at >= start:
                            return at.timestamp()
            day += dt.timedelta(days=1)
        raise ConfigError(f"cron {self.expr!r} matches no time within 5 years")

"""A value the user's task selects by a property from a listing of the user's own records.

"Delete the largest file": which file is the user's choice, made by a property ("largest":
the greatest ``size``) over a listing the user asked for. ``select_by`` computes that choice
in the runtime, never in a model: the task must be untainted and name the selector word
verbatim, and every candidate's value and key must come from the user's own records
(``record`` or ``user`` sources), so text a third party wrote cannot steer the pick. The one
value chosen is labelled as the user's (source ``user:select[...]``): a destructive argument
that accepts only the user's words (an id to delete) accepts it, and only it; every other
value of the listing keeps its record label and is refused there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, TrustError
from ._labels import Label, Labeled
from ._tools import kind_of

__all__ = ["select_by"]

_PICKS = ("max", "min")
_OWN = ("record", "user")


def _own(value: Any, what: str) -> Any:
    if not isinstance(value, Labeled):
        raise TrustError(
            f"select_by: {what} is unlabelled ({value!r}); label the listing with label_output",
            sink="select",
        )
    foreign = sorted(s for s in value.label.sources if kind_of(s) not in _OWN)
    if foreign:
        raise TrustError(
            f"select_by: {what}={value.value!r} comes from {foreign[0]} ({kind_of(foreign[0])}): "
            f"a selection picks among the user's own records only (record or user sources); "
            f"have a person endorse the choice instead",
            sink="select",
            sources=tuple(foreign),
        )
    return value.value


def select_by(
    task: Labeled[str],
    items: Sequence[Mapping[str, Any]],
    *,
    field: str,
    key: str,
    pick: str,
    words: str,
) -> Labeled[Any]:
    """The ``field`` of the one item of ``items`` with the ``pick`` (``max``/``min``) ``key``,
    labelled as chosen by the user's ``task`` (see the module docstring).

    Raises:
        TrustError: the task is tainted or does not contain ``words``; an item's ``field`` or
            ``key`` is not the user's own record; no item, or a tie for the pick.
        ConfigError: ``pick`` is not ``max`` or ``min``; the keys are not all numbers or all
            text.
    """
    if pick not in _PICKS:
        raise ConfigError(f"select_by: pick must be one of {_PICKS}, got {pick!r}")
    if not isinstance(task, Labeled) or task.label.tainted:
        raise TrustError("select_by: the task must be the user's untainted words", sink="select")
    if not words or words.lower() not in str(task.value).lower():
        raise TrustError(
            f"select_by: the task does not name the selection {words!r}; a selection is the "
            f"user's only when the task's own words name it",
            sink="select",
        )
    ranked: list[tuple[Any, Any]] = []
    for n, item in enumerate(items):
        if field not in item or key not in item:
            raise TrustError(f"select_by: item {n} has no {field!r} or {key!r}", sink="select")
        ranked.append((_own(item[key], f"item {n}.{key}"), _own(item[field], f"item {n}.{field}")))
    if not ranked:
        raise TrustError("select_by: nothing to select from", sink="select")
    keys = [k for k, _ in ranked]
    numbers = all(isinstance(k, int | float) and not isinstance(k, bool) for k in keys)
    if not (numbers or all(isinstance(k, str) for k in keys)):
        raise ConfigError(
            f"select_by: {key!r} must be all numbers or all text to compare, got "
            f"{sorted({type(k).__name__ for k in keys})}"
        )
    best = (max if pick == "max" else min)(keys)
    chosen = [v for k, v in ranked if k == best]
    if len(chosen) != 1:
        raise TrustError(
            f"select_by: {len(chosen)} items tie for the {pick} {key!r}; the task names one "
            f"item only when one has it",
            sink="select",
        )
    return Labeled(chosen[0], Label.of(f"user:select[{pick} {key} {words}]", "trusted"))

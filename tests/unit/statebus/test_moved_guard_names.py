"""The guard's names still resolve on ``surefoot.statebus`` for one release, each read warning
with ``DeprecationWarning`` at the reader's line and naming ``surefoot.guard``."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import surefoot.guard as guard
import surefoot.statebus as statebus

# What statebus exported until 0.1 and keeps exporting: the errors and the trust levels an
# entry carries. Every other name of the guard was exported by statebus until 0.1.
KEPT = {"TRUST_LEVELS", "TrustError"}
ADDED_SINCE = {
    "item_of",
    "select_by",
    "Quote",
    "compose_answer",
    "typed_value",
    "item_source",
    "named_in",
}  # guard names added after the move: never in statebus
MOVED = sorted(set(guard.__all__) - KEPT - ADDED_SINCE)


@pytest.mark.parametrize("name", MOVED)
def test_old_name_warns_and_returns_the_guards_object(name: str) -> None:
    """Each moved name returns the very object ``surefoot.guard`` exports, with a warning."""
    with pytest.warns(DeprecationWarning, match=rf"surefoot\.guard\.{name}\b"):
        got = getattr(statebus, name)
    assert got is getattr(guard, name)
    assert name not in statebus.__all__


def test_the_names_statebus_keeps_are_still_exported_without_a_warning() -> None:
    """The errors and trust levels stay statebus names: bound, listed, and silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(getattr(statebus, n) is getattr(guard, n) for n in KEPT)
    assert set(statebus.__all__) >= KEPT
    assert len(MOVED) == 27


def test_warning_points_at_the_line_that_read_the_name() -> None:
    """``from surefoot.statebus import X`` and ``statebus.X`` warn at the reader's own line."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        from surefoot.statebus import CapabilityPolicy  # noqa: F401 # reads an old name

        _ = statebus.trusted  # reads an old name
    marked = [i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1) if _reads(t)]
    assert len(marked) == 2 and got and all(w.category is DeprecationWarning for w in got)
    assert {(w.filename, w.lineno) for w in got} == {(__file__, n) for n in marked}


def _reads(text: str) -> bool:
    return text.rstrip().endswith("# reads an old name")


def test_the_lab_names_are_still_explained_after_the_guards() -> None:
    """A name that moved to the lab raises an AttributeError naming its place in the lab
    distribution; a name that never existed is an AttributeError that warns about nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=r"surefoot_lab\.statebus"):
            _ = statebus.shared
        with pytest.raises(AttributeError, match="no attribute 'Stroe'"):
            _ = statebus.Stroe  # type: ignore[attr-defined]

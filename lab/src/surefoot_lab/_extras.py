"""The lab's own extras (``lab/pyproject.toml``): the error that names one to install."""

from __future__ import annotations

from surefoot.errors import MissingExtraError

__all__ = ["DISTRIBUTION", "missing_extra"]

DISTRIBUTION = "surefoot-lab"
"""The lab's distribution name: its extras are ``surefoot-lab[dbos]``, not ``surefoot[…]``."""


def missing_extra(extra: str, purpose: str, hint: str | None = None) -> MissingExtraError:
    """A ``MissingExtraError`` naming the lab's ``extra``, and how to install it from a clone
    (``hint`` instead, when given)."""
    how = hint or f"from a clone of surefoot: pip install './lab[{extra}]'"
    return MissingExtraError(extra, f"{purpose} ({how})", distribution=DISTRIBUTION)

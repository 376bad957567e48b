"""What each attempt of a provider call came to, told to whoever collects it.

A client (``surefoot.llm``) calls :func:`note_attempt` once per attempt with a short
outcome: the HTTP status of a failed attempt (``"503"``, ``"429"``), the error's type when
there is none (``"APIConnectionError"``), ``"invalid"`` for a reply its checks refused,
``"ok"``. Nothing listens by default (one attribute read per attempt); a durable step
collects its own (``surefoot.durable`` sets :data:`ATTEMPT_NOTES`' sink), so a run's page
shows what a step's calls went through.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ATTEMPT_NOTES", "AttemptNotes", "attempt_outcome", "note_attempt"]


class AttemptNotes:
    """The one place attempt outcomes go: ``sink(outcome)``, or nowhere (None)."""

    __slots__ = ("sink",)

    def __init__(self) -> None:
        self.sink: Callable[[str], None] | None = None


ATTEMPT_NOTES = AttemptNotes()


def note_attempt(outcome: str) -> None:
    """Tell the sink (if any) what one attempt came to."""
    sink = ATTEMPT_NOTES.sink
    if sink is not None:
        sink(outcome)


def attempt_outcome(exc: BaseException) -> str:
    """A failed attempt's outcome: its HTTP status if it has one, else its type's name."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return str(status)
    return type(exc).__name__

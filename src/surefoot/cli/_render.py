"""Print rich renderables without cutting cells."""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.measure import Measurement

__all__ = ["print_fitted"]


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

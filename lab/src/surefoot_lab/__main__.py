"""``python -m surefoot_lab``: the ``surefoot-lab`` command (``surefoot lab``)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()

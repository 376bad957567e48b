"""``python -m surefoot`` and the ``surefoot`` command.

Without the ``cli`` extra, says which extra to install instead of a traceback.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from .cli import main as cli_main
    except ImportError as exc:  # click or rich missing
        if exc.name in ("click", "rich") or (exc.name or "").startswith(("click.", "rich.")):
            sys.stderr.write(
                "surefoot: the command line needs the cli extra: pip install 'surefoot[cli]'\n"
            )
            raise SystemExit(1) from None
        raise
    cli_main()


if __name__ == "__main__":
    main()

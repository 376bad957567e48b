"""Shared helpers of the seed 001 lab experiments."""

from __future__ import annotations

SEED_FILE = "001_d92b2f82bced6f8a.txt"
MSGS = [{"role": "user", "content": "Summarise the incident report in one line."}]


def pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}%"


class SocketReset(ConnectionResetError):
    """A connection reset, as the socket layer raises it."""

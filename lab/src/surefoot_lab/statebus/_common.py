"""What the seed 000 experiments share: the seed file's name, the counted columns, rounding."""

from __future__ import annotations

SEED_FILE = "000_1a539fd3941fa9e6.txt"
COUNTS = ("kept", "lost", "retries", "model_calls", "ticks", "conflicts", "lost_updates")


def rounded(x: float) -> float:
    return round(x, 2)


def compare(real: float, sim: float, what: str) -> str:
    """One sentence comparing a measured count with the simulation's prediction."""
    if sim == 0:
        return f"Real {what}: {real:g}; the simulation predicted 0."
    return f"Real {what}: {real:g} against {sim:.1f} predicted ({real / sim:.2f}× the simulation)."

"""The core back-off schedule: resilience.Backoff's waits are its waits, the storage
clients' reconnect waits are the ones they wrote by hand before, and it stands alone."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from surefoot import backoff as backoff_module
from surefoot.backoff import JITTERS, RECONNECT, Schedule
from surefoot.errors import ConfigError
from surefoot.resilience import Backoff

# resilience.Backoff(0.5, 8, jitter).waits(8, Random(7)) as it was before the schedule moved
# to the core (printed by the previous release's code).
BEFORE = {
    "none": [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0],
    "full": [
        0.16191638241658118, 0.15084917392450192, 1.3018689460797075, 0.28974514667017104,
        4.287056034453514, 2.9255113353006843, 0.46399139819765445, 4.059485865515362,
    ],
    "equal": [
        0.3309581912082906, 0.575424586962251, 1.6509344730398539, 2.1448725733350855,
        6.143528017226757, 5.462755667650342, 4.231995699098827, 6.0297429327576815,
    ],
    "decorrelated": [
        0.8238327648331624, 0.797398889118812, 1.7316960405534292, 0.8400947491099595,
        1.5826339717283664, 2.0534106505149365, 0.8282873671650393, 1.5071899557520685,
    ],
}  # fmt: skip


@pytest.mark.parametrize("jitter", JITTERS)
def test_resilience_backoff_draws_the_same_waits_as_before(jitter: str) -> None:
    """For the same seed, Backoff and the core Schedule give the waits Backoff gave before."""
    assert Backoff(0.5, 8, jitter).waits(8, random.Random(7)) == BEFORE[jitter]
    assert Schedule(0.5, 8, jitter).waits(8, random.Random(7)) == BEFORE[jitter]
    assert isinstance(Backoff(), Schedule)


def test_reconnect_waits_match_the_hand_written_loop() -> None:
    """RECONNECT checks the same ceilings and draws the same sleeps as the old loop
    (wait 0.05 s doubling to 2 s, sleep wait / 2 + uniform(0, wait / 2))."""
    old_rng, new_rng = random.Random("1:postgresql://x"), random.Random("1:postgresql://x")
    wait = 0.05
    for n in range(1, 12):
        assert RECONNECT.ceiling(n) == wait
        assert RECONNECT.wait(n, new_rng) == wait / 2 + old_rng.uniform(0, wait / 2)
        wait = min(2.0, wait * 2)


def test_the_core_schedule_imports_only_the_standard_library_and_the_core() -> None:
    """surefoot/backoff.py imports the standard library, clock and errors, nothing else."""
    tree = ast.parse(Path(backoff_module.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    assert names == {
        "__future__",
        "math",
        "random",
        "dataclasses",
        "datetime",
        ".clock",
        ".errors",
    }


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("cls", [Schedule, Backoff])
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"base": INF, "cap": INF}, "base"),
        ({"base": 1.0, "cap": INF}, "cap"),
        ({"base": NAN}, "base"),
        ({"cap": NAN}, "cap"),
        ({"multiplier": INF}, "multiplier"),
        ({"multiplier": NAN}, "multiplier"),
    ],
)
def test_non_finite_waits_are_refused_when_made_not_when_slept(
    cls: type[Schedule], kwargs: dict[str, float], name: str
) -> None:
    """An infinite or NaN base, cap or multiplier raises ConfigError naming it at construction."""
    with pytest.raises(ConfigError) as ei:
        cls(**kwargs)
    assert f"backoff {name} must be" in str(ei.value) and "finite" in str(ei.value)

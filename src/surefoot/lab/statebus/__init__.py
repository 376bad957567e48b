"""Lab experiments for surefoot.statebus (seed 000), registered on import.

Each experiment answers one exercise's "Done when" with measured tables, using only the
public API of ``surefoot.statebus``. The model is the seeded FakeLLM unless said otherwise.
The modules are imported in the course's order (Easy, Medium, Hard 1 = real agents), which
is the order the experiments register and run in; the resolver and trust experiments (Hard 2
and 3) live in ``surefoot.lab.statebus_trust`` and register after them.
"""

from __future__ import annotations

import importlib

from ._common import SEED_FILE
from ._easy import duplicates, lost_update, policies
from ._medium import backoff, dead_letters, partition
from ._real_agents import real_agents

__all__ = [
    "SEED_FILE",
    "backoff",
    "dead_letters",
    "duplicates",
    "lost_update",
    "partition",
    "policies",
    "real_agents",
]


def _load_trust() -> None:
    """Register the trust and resolver experiments, which live in their own module."""
    importlib.import_module("surefoot.lab.statebus_trust")


_load_trust()

"""Lab experiments for surefoot.durable (seed 002), registered on import.

Every experiment runs the 7-step agent (``surefoot_lab.agent``) on the seeded FakeLLM
and fake tools whose ledger counts what they receive, so costs and duplicate effects are
counted by the services, not by the code under test. In-process experiments use a
``FakeClock``; ``durable.kill9`` and ``durable.chaos`` use real worker processes and SIGKILL.

The modules register in the exercises' order: ``crashes`` (strategies, window, effects,
kill9), ``operations`` (versions, timers, chaos, saga), ``port`` (the DBOS and Temporal
ports), ``frameworks`` (a PydanticAI agent on surefoot, DBOS and Temporal, killed at random)
and ``scaleout`` (chaos on PostgreSQL).
"""

from __future__ import annotations

# Import order is registration order, which `surefoot lab list` keeps (alphabetical here).
from . import crashes, frameworks, operations, port, scaleout  # noqa: F401 - registers the experiments
from ._common import SEED_FILE, STRATEGIES

__all__ = ["SEED_FILE", "STRATEGIES"]

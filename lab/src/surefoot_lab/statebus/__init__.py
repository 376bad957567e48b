"""Lab experiments for surefoot.statebus (seed 000), registered on import.

Each experiment answers one exercise's "Done when" with measured tables, using the public
API of ``surefoot.statebus`` and the course's simulators, which live here too: ``shared``
(the tick simulator of a team under ``last_writer_wins``, ``optimistic``, ``locked`` and
``partitioned``; its engine is ``simulator``), ``messages`` (delivery over the lossy
``channel.Channel``), ``real_agents`` (real agent processes), ``resolvers`` (the resolver
simulation and its closed form), ``injection`` (the attack corpus, its harness and models)
and ``agentdojo`` (AgentDojo's suites through per-argument capabilities; needs the
``agentdojo`` extra). The model is the seeded FakeLLM unless said otherwise.

The modules are imported in the course's order (Easy: ``policies``; Medium: ``delivery``;
Hard 1-3: ``real_agents``, ``resolvers``, ``injection``, ``agentdojo``), which is the order
the experiments register and run in, so the imports below must not be sorted.
"""

from __future__ import annotations

# isort: off
from . import policies  # noqa: F401 - registers the experiments
from . import delivery  # noqa: F401
from . import real_agents  # noqa: F401
from . import resolvers  # noqa: F401
from . import injection  # noqa: F401
from . import agentdojo  # noqa: F401

# isort: on
from ._common import SEED_FILE

__all__ = ["SEED_FILE"]

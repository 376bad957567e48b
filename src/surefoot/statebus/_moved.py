"""Names ``surefoot.statebus`` exported until 0.1 that are course material, not product.

The simulators, the real-agents harness and the injection corpus are the lab's, and the lab
is its own distribution now (``surefoot-lab``, in ``lab/`` of the repository), which the
product never imports. Reading one of their old names here raises ``AttributeError`` saying
where the name lives and how to install the lab. Remove this module (and its import in
``__init__``) in the release after 0.1.
"""

from __future__ import annotations

from typing import NoReturn

# old name on surefoot.statebus -> (module of surefoot_lab.statebus, attribute; None: module)
MOVED: dict[str, tuple[str, str | None]] = {
    "Channel": ("channel", "Channel"),
    "RealAgentsReport": ("real_agents", "RealAgentsReport"),
    "ResolverStats": ("resolvers", "ResolverStats"),
    "injection": ("injection", None),
    "judge_responder": ("resolvers", "judge_responder"),
    "messages": ("messages", None),
    "predicted_accuracy": ("resolvers", "predicted_accuracy"),
    "run_real_agents": ("real_agents", "run_real_agents"),
    "shared": ("shared", None),
    "simulate": ("resolvers", "simulate"),
}


def __getattr__(name: str) -> NoReturn:
    """Say where a name that left for the lab lives now; any other name is simply missing."""
    moved = MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'surefoot.statebus' has no attribute {name!r}")
    module, attr = moved
    where = f"surefoot_lab.statebus.{module}" + ("" if attr is None else f".{attr}")
    raise AttributeError(
        f"surefoot.statebus.{name} is course material: it is {where} now, in the lab, a "
        "separate distribution that `pip install surefoot` does not install. Install it from "
        "the surefoot repository (`pip install ./lab`) and import it from there."
    )

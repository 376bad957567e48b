"""Deprecated aliases: the course material that ``surefoot.statebus`` exported until 0.1.

The simulators, the real-agents harness and the injection corpus moved to
``surefoot.lab.statebus``. Reading one of their old names on ``surefoot.statebus`` returns
the lab's object and warns with ``DeprecationWarning`` naming the new place. Remove this
module (and its import in ``__init__``) in the release after 0.1.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# old name on surefoot.statebus -> (module of surefoot.lab.statebus, attribute; None: module)
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


def __getattr__(name: str) -> Any:
    """Resolve a name that moved to the lab, with a ``DeprecationWarning`` naming its place."""
    moved = MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'surefoot.statebus' has no attribute {name!r}")
    module, attr = moved
    new = f"surefoot.lab.statebus.{module}"
    where = new if attr is None else f"{new}.{attr}"
    warnings.warn(
        f"surefoot.statebus.{name} is course material and moved to {where}; import it from "
        "there (this alias goes in the release after 0.1)",
        DeprecationWarning,
        stacklevel=2,
    )
    # By name, not an import statement: the product never imports the lab, only this alias
    # resolves into it, and only when an old name is read.
    mod = importlib.import_module(f"surefoot.lab.statebus.{module}")
    return mod if attr is None else getattr(mod, attr)

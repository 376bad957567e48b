"""Deprecated aliases: the guard's names that ``surefoot.statebus`` exported until 0.1.

Trust labels, the sink and capability policies, plans and the quarantined parser moved to
``surefoot.guard``. Reading one of their old names on ``surefoot.statebus`` returns the
guard's object and warns with ``DeprecationWarning`` naming the new place.

Each alias is a property of the package's module class, so it is found before the module's
``__getattr__`` (the lab's aliases, ``_moved``) is consulted, and the warning's
``stacklevel=2`` is the line that read the name. Remove this module (and its call in
``__init__``) in the release after 0.1.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

from .. import guard

# old names on surefoot.statebus, each now surefoot.guard.<the same name>
MOVED = (
    "FIELD_TYPES",
    "KINDS",
    "Answer",
    "Arg",
    "CapabilityPolicy",
    "Condition",
    "Delegation",
    "Endorser",
    "Label",
    "Labeled",
    "Plan",
    "PlanRunner",
    "PlanStep",
    "QuarantinedParser",
    "SinkPolicy",
    "ToolPolicy",
    "derive",
    "document_of",
    "env_label",
    "kind_of",
    "label_of",
    "label_output",
    "labeled",
    "make_plan",
    "reject_label_fields",
    "render",
    "trusted",
)


def _alias(name: str) -> property:
    def read(module: types.ModuleType) -> Any:
        warnings.warn(
            f"surefoot.statebus.{name} moved to surefoot.guard.{name}; import it from "
            "surefoot.guard (this alias goes in the release after 0.1)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(guard, name)

    return property(read, doc=f"Deprecated: surefoot.guard.{name}.")


class _StatebusModule(types.ModuleType):
    """``surefoot.statebus`` with the deprecated guard names as warning properties."""


for _name in MOVED:
    setattr(_StatebusModule, _name, _alias(_name))


def install(module_name: str) -> None:
    """Give the module ``module_name`` (``surefoot.statebus``) the deprecated aliases."""
    sys.modules[module_name].__class__ = _StatebusModule

"""Each public package's ``__all__`` is sorted and is exactly its public names (as httpx does).

A public name is one a package binds without a leading underscore, except ``annotations``
(from ``from __future__ import annotations``), names imported from outside surefoot for the
package's own use (``Iterator``, ``contextlib``), and submodules bound only because they were
imported (``surefoot.clock`` after ``from .clock import Clock``): a submodule is public when
the package's ``__init__`` imports it by name (``from . import faults``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
import warnings
from pathlib import Path

import pytest

PACKAGES = [
    "surefoot",
    "surefoot.resilience",
    "surefoot.durable",
    "surefoot.guard",
    "surefoot.statebus",
    "surefoot.storage",
    "surefoot.llm",
    "surefoot_lab",
    "surefoot.telemetry",
    "surefoot.testing",
    "surefoot.integrations.mcp",
]
# Private by spelling, public by intent, as httpx lists ``__version__``.
DUNDERS = {"__version__"}


def _declared_submodules(module: types.ModuleType) -> set[str]:
    """The names ``from . import a, b`` binds in a package's ``__init__``."""
    if not hasattr(module, "__path__"):
        return set()
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None
        for alias in node.names
    }


def _is_own(value: object, top: str) -> bool:
    """True when ``value`` comes from the package ``top`` (``surefoot``, ``surefoot_lab``), or
    has no module (a constant)."""
    origin = getattr(value, "__module__", None)
    if not (inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value)):
        return True
    return isinstance(origin, str) and origin.split(".")[0] == top


def public_names(module: types.ModuleType) -> set[str]:
    """What ``module`` binds for its users, by the rules in this file's docstring."""
    declared = _declared_submodules(module)
    names = set()
    for name, value in vars(module).items():
        if name == "annotations" or (name.startswith("_") and name not in DUNDERS):
            continue
        if isinstance(value, types.ModuleType):
            if name in declared:
                names.add(name)
            continue
        if _is_own(value, module.__name__.split(".")[0]):
            names.add(name)
    return names


def sort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then the rest, each by name."""
    if len(name) > 1 and name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_equals_the_public_names(name: str) -> None:
    """``__all__`` is sorted and lists every public name, nothing more, nothing less."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=sort_key), f"{name}.__all__ is not sorted"
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    public = public_names(module)
    assert set(exported) - public == set(), f"{name}.__all__ lists names it does not bind"
    assert public - set(exported) == set(), f"{name} binds public names missing from __all__"


def test_statebus_exports_only_the_product() -> None:
    """No simulator, harness or corpus name is among ``surefoot.statebus``'s exports."""
    import surefoot.statebus as statebus

    lab_names = {
        "Channel",
        "RealAgentsReport",
        "ResolverStats",
        "injection",
        "judge_responder",
        "messages",
        "predicted_accuracy",
        "run_real_agents",
        "shared",
        "simulate",
    }
    assert lab_names & set(statebus.__all__) == set()
    assert {"Store", "Stream", "judge", "priority", "vote"} <= set(statebus.__all__)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("shared", "surefoot_lab.statebus.shared"),
        ("messages", "surefoot_lab.statebus.messages"),
        ("injection", "surefoot_lab.statebus.injection"),
        ("Channel", "surefoot_lab.statebus.channel.Channel"),
        ("simulate", "surefoot_lab.statebus.resolvers.simulate"),
        ("run_real_agents", "surefoot_lab.statebus.real_agents.run_real_agents"),
    ],
)
def test_old_statebus_names_of_the_lab_say_where_they_went(old: str, new: str) -> None:
    """An old ``surefoot.statebus`` name of the lab's raises AttributeError naming its place
    in the lab and how to install it, and the product imports nothing of the lab for it."""
    import surefoot.statebus as statebus

    before = {m for m in sys.modules if m.startswith("surefoot_lab")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError) as info:
            getattr(statebus, old)
    message = str(info.value)
    assert f"surefoot.statebus.{old} is course material" in message
    assert f"it is {new} now" in message
    assert "pip install ./lab" in message
    assert {m for m in sys.modules if m.startswith("surefoot_lab")} == before


def test_unknown_statebus_name_is_an_attribute_error() -> None:
    """A name that never existed raises AttributeError and warns about nothing."""
    import surefoot.statebus as statebus

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'Stroe'"):
            _ = statebus.Stroe  # type: ignore[attr-defined]

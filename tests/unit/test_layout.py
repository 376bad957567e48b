"""The package layout, read from the source with ``ast``: product apart from lab, no reaching in.

- nothing in ``surefoot`` imports the lab (``surefoot_lab``, its own distribution in ``lab/``);
- ``durable/`` and ``statebus/`` import nothing from ``surefoot.llm``;
- ``guard/`` imports nothing from ``statebus``, ``durable`` or ``cli`` (statebus uses the
  guard, not the other way round; the guard may use the core, ``resilience`` and ``llm``);
- nothing outside ``cli/`` imports ``surefoot.cli`` (the ``python -m surefoot`` entry
  excepted); in the lab, only its command line (``surefoot_lab.cli``) does;
- no module imports another module's ``_private`` name, nor a private module of another
  subsystem (``from ._store import Store`` inside ``statebus`` is fine,
  ``from ._step import _recorded`` is not, ``from ..durable._app import App`` is not);
- the lab imports surefoot as a user does: no ``_private`` name or module of ``surefoot``.

Imports are every ``import``/``from`` statement, at any depth (lazy ones too), and every
``importlib.import_module("surefoot…")`` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import surefoot
import surefoot_lab

SRC = Path(surefoot.__file__).parent
LAB = Path(surefoot_lab.__file__).parent

# Cases that break a rule today, each with the reason; the integrator empties this list as
# the owners fix them. An entry that no longer occurs fails the test, so the list stays true.
ALLOWED: dict[tuple[str, str], str] = {}

# What the guard must not import: the subsystems that use it and the CLI.
GUARD_BELOW = ("surefoot.statebus", "surefoot.durable", "surefoot.cli")


@dataclass(frozen=True)
class Imported:
    """One imported target as seen from one module."""

    module: str  # the importing module, dotted
    target: str  # the module imported, or module.name for a from-import of a name
    is_name: bool  # True when ``target`` ends with a name taken from a module
    line: int


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a (possibly relative) ``from`` statement names."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _imports(path: Path, root: Path = SRC) -> Iterator[Imported]:
    module = _module_name(path, root)
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Imported(module, alias.name, False, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            yield Imported(module, base, False, node.lineno)
            for alias in node.names:
                yield Imported(module, f"{base}.{alias.name}", True, node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
        ):
            arg = node.args[0]
            text = arg.value if isinstance(arg, ast.Constant) else None
            if isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                text = f"{arg.values[0].value}*"  # an f-string: its literal prefix
            if isinstance(text, str) and text.startswith("surefoot"):
                yield Imported(module, text, False, node.lineno)


def all_imports(root: Path = SRC) -> list[Imported]:
    return [imp for path in sorted(root.rglob("*.py")) for imp in _imports(path, root)]


def _within(target: str, package: str) -> bool:
    return target == package or target.startswith(package + ".")


def _allowed(imp: Imported) -> bool:
    return any(_allowed_by(imp, key) for key in ALLOWED)


def _subsystem(module: str) -> str:
    """``surefoot.statebus._store`` -> ``surefoot.statebus``; ``surefoot.testing`` itself."""
    return ".".join(module.split(".")[:2])


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _private_reach(imp: Imported) -> bool:
    """True when ``imp`` takes a private name of another module, or a private module of
    another subsystem (a lab module: of any part of ``surefoot``)."""
    mod, parts = imp.module, imp.target.split(".")
    if imp.is_name:
        owner, name = ".".join(parts[:-1]), parts[-1]
        # ``from . import _sub`` imports a private module, not a private name
        is_module = (SRC.parent / Path(*parts)).with_suffix(".py").exists() or (
            SRC.parent / Path(*parts) / "__init__.py"
        ).exists()
        if _is_private(name) and not is_module and owner != mod:
            return True
    module_part = ".".join(parts[:-1]) if imp.is_name else imp.target
    private_module = any(_is_private(p) for p in module_part.split(".")[1:])
    return private_module and _subsystem(module_part) != _subsystem(mod)


def _violations() -> dict[str, list[Imported]]:
    found: dict[str, list[Imported]] = {
        "lab": [],
        "llm": [],
        "cli": [],
        "private": [],
        "guard_above": [],
    }
    for imp in all_imports(SRC):
        mod, tgt = imp.module, imp.target
        if _within(tgt, "surefoot_lab"):
            found["lab"].append(imp)
        if _within(mod, "surefoot.guard") and any(_within(tgt, p) for p in GUARD_BELOW):
            found["guard_above"].append(imp)
        product = _within(mod, "surefoot.durable") or _within(mod, "surefoot.statebus")
        if product and _within(tgt, "surefoot.llm"):
            found["llm"].append(imp)
        outside = not _within(mod, "surefoot.cli") and mod != "surefoot.__main__"
        if outside and _within(tgt, "surefoot.cli"):
            found["cli"].append(imp)
        if _private_reach(imp):
            found["private"].append(imp)
    for imp in all_imports(LAB):
        if not _within(imp.target, "surefoot"):
            continue  # the lab's own modules, the standard library, the SDKs
        if not _within(imp.module, "surefoot_lab.cli") and _within(imp.target, "surefoot.cli"):
            found["cli"].append(imp)
        if _private_reach(imp):
            found["private"].append(imp)
    return found


def _report(items: list[Imported]) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target}" for i in items if not _allowed(i)]


def test_the_product_never_imports_the_lab() -> None:
    """No module of ``surefoot``, at any depth or by ``import_module``, imports surefoot_lab."""
    assert _report(_violations()["lab"]) == []


def test_durable_and_statebus_import_nothing_from_llm() -> None:
    """No import in durable/ or statebus/ reaches surefoot.llm."""
    assert _report(_violations()["llm"]) == []


def test_only_command_lines_import_the_cli() -> None:
    """Product modules never import surefoot.cli; in the lab only its command line does."""
    assert _report(_violations()["cli"]) == []


def test_guard_imports_nothing_of_statebus_durable_lab_or_cli() -> None:
    """``surefoot.guard`` sits below the subsystems that use it: no import of theirs."""
    assert _report(_violations()["guard_above"]) == []


def test_no_module_imports_another_modules_private_names() -> None:
    """No ``from X import _name`` across modules, no private module of another subsystem;
    the lab takes nothing private from surefoot."""
    assert _report(_violations()["private"]) == []


def test_allow_list_has_no_stale_entries() -> None:
    """Every allow-listed case still occurs, so fixing one forces removing its entry."""
    found = [imp for kind in _violations().values() for imp in kind]
    stale = [key for key in ALLOWED if not any(_allowed_by(imp, key) for imp in found)]
    assert stale == []


def _allowed_by(imp: Imported, key: tuple[str, str]) -> bool:
    module, target = key
    if imp.module != module:
        return False
    if target.endswith(".*"):
        return imp.target.startswith(target[:-1])
    return imp.target == target


def test_the_checker_sees_each_kind_of_violation(tmp_path: Path) -> None:
    """On made-up sources the checker finds a private name, a lab import, a lazy one."""
    pkg = tmp_path / "surefoot" / "statebus"
    pkg.mkdir(parents=True)
    src = (
        "from ._store import Store, _helper\n"
        "from surefoot_lab.statebus import shared\n"
        "def f():\n"
        "    import importlib\n"
        "    return importlib.import_module('surefoot.llm')\n"
    )
    (pkg / "x.py").write_text(src)
    got = {(i.target, i.is_name) for i in _imports(pkg / "x.py", tmp_path / "surefoot")}
    assert ("surefoot.statebus._store._helper", True) in got
    assert ("surefoot_lab.statebus", False) in got
    assert ("surefoot.llm", False) in got
    guard = tmp_path / "surefoot" / "guard"
    guard.mkdir()
    (guard / "_labels.py").write_text("def f():\n    from ..statebus import Store\n")
    got = {i.target for i in _imports(guard / "_labels.py", tmp_path / "surefoot")}
    assert "surefoot.statebus.Store" in got


def test_the_checker_flags_the_lab_reaching_into_private_surefoot() -> None:
    """A lab module taking a private module or name of surefoot is flagged; public ones not."""
    lab = "surefoot_lab.agent._ledger"
    assert _private_reach(Imported(lab, "surefoot.storage.sqlite._db.SQLiteDB", True, 1))
    assert _private_reach(Imported(lab, "surefoot.durable._step", False, 1))
    assert _private_reach(Imported(lab, "surefoot.errors._base", True, 1))
    assert not _private_reach(Imported(lab, "surefoot.storage.sqlite.SQLiteDB", True, 1))
    assert not _private_reach(Imported(lab, "surefoot.__version__", True, 1))

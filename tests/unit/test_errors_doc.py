"""docs/errors.md: its tree is exactly the classes of surefoot.errors, parents and builtins."""

from __future__ import annotations

import builtins
import inspect
import re
from pathlib import Path

from surefoot import errors

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def documented_tree() -> dict[str, tuple[str | None, set[str]]]:
    """Each class of the doc's tree: its parent in the tree and the builtins it says it extends."""
    block = re.search(r"^```\n(SurefootError\n.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert block is not None
    tree: dict[str, tuple[str | None, set[str]]] = {}
    stack: list[tuple[int, str]] = []
    for line in block.group(1).splitlines():
        m = re.match(r"^([│├└─ ]*)(\w+)(.*)$", line)
        assert m is not None, line
        depth, name = len(m.group(1)) // 4, m.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        also = set(re.findall(r"also (\w+)", m.group(3)))
        tree[name] = (stack[-1][1] if stack else None, also)
        stack.append((depth, name))
    return tree


def actual_tree() -> dict[str, tuple[str | None, set[str]]]:
    """Each SurefootError class: its surefoot parent and its builtin bases."""
    tree: dict[str, tuple[str | None, set[str]]] = {}
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if not issubclass(cls, errors.SurefootError):
            continue
        ours = [b.__name__ for b in cls.__bases__ if issubclass(b, errors.SurefootError)]
        also = {b.__name__ for b in cls.__bases__ if getattr(builtins, b.__name__, None) is b}
        tree[name] = (ours[0] if ours else None, also - {"Exception"})
    return tree


def test_errors_doc_tree_matches_code() -> None:
    """Every error class appears once, under its real parent, with its real builtin bases."""
    assert documented_tree() == actual_tree()


def test_errors_doc_names_every_attribute() -> None:
    """Every attribute an error's __init__ sets is named in the doc's attributes table."""
    text = DOC.read_text()
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.SurefootError) and "__init__" in vars(cls):
            source = inspect.getsource(vars(cls)["__init__"])
            for attr in re.findall(r"self\.(\w+) = ", source):
                assert f"`{attr}`" in text, f"{name}.{attr} is not in docs/errors.md"


def test_missing_extra_names_the_distribution_whose_extra_it_is() -> None:
    """MissingExtraError says surefoot[extra] by default, and another distribution's when given."""
    own = errors.MissingExtraError("postgres", "postgresql:// stores")
    assert (own.distribution, str(own)) == (
        "surefoot",
        "install surefoot[postgres] to use postgresql:// stores",
    )
    lab = errors.MissingExtraError("dbos", "the DBOS port", distribution="surefoot-lab")
    assert str(lab) == "install surefoot-lab[dbos] to use the DBOS port" and lab.extra == "dbos"

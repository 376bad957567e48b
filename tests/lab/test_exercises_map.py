"""docs/exercises.md's module table names, for every lab experiment, the module that defines it."""

from __future__ import annotations

import re
from pathlib import Path

import surefoot_lab as lab

DOC = Path(__file__).parents[2] / "docs" / "exercises.md"


def test_module_table_matches_where_each_experiment_is_defined() -> None:
    """Each id is listed once, beside the module whose function registers it."""
    listed: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| `lab/([a-z_/]+)\.py`[^|]*\| (.+) \|$", line)
        if m is None:
            continue
        module = "surefoot_lab." + m.group(1).replace("/", ".")
        for exp_id in re.findall(r"`([a-z]+\.[a-z0-9-]+)`", m.group(2)):
            assert exp_id not in listed, f"{exp_id} listed twice"
            listed[exp_id] = module
    actual = {e.id: e.fn.__module__ for e in lab.experiments()}
    assert listed == actual

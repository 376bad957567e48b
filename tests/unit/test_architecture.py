"""docs/architecture.md draws the subsystems from the source, and every arrow points down.

``scripts/gen_architecture.py --check`` regenerates the drawing from the package's imports and
compares; the checks below show it can fail: an upward arrow, a subsystem in no layer, and a
drifted page are each reported.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_architecture.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_architecture", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_architecture_page_is_current_and_arrows_point_down() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_upward_or_sideways_arrow_is_reported() -> None:
    gen = _script()
    subs = {
        "storage": {"durable": 1, "errors": 2},  # up
        "durable": {"statebus": 1},  # sideways: the two stand apart
        "errors": {},
        "statebus": {},
        "clock": {"codec": 1},  # inside the core, against its order
        "codec": {},
    }
    found = gen.problems(subs)
    assert any(p.startswith("storage -> durable") for p in found)
    assert any(p.startswith("durable -> statebus") for p in found)
    assert any(p.startswith("clock -> codec") for p in found)
    assert not any("storage -> errors" in p for p in found)


def test_a_subsystem_in_no_layer_is_reported() -> None:
    gen = _script()
    found = gen.problems({"newthing": {"errors": 1}, "errors": {}})
    assert found == ["newthing: in no layer of LAYERS (scripts/gen_architecture.py); give it one"]


def test_a_drifted_page_is_found(tmp_path: Path) -> None:
    gen = _script()
    part = gen.render(gen.subsystem_graph(gen.import_graph()))
    page = f"# x\n\n{gen.BEGIN}\n| stale |\n{gen.END}\n"
    assert gen.generated_doc(page, part) != page
    current = gen.generated_doc(page, part)
    assert gen.generated_doc(current, part) == current
    assert "durable --> storage" in part

"""The lab's API as a course reader types it: checked by ``mypy --strict``, never executed.

The lab (``surefoot_lab``, its own distribution in ``lab/``) on the product's public names:
running one experiment from Python, and the demo agent on a journal.
"""

from __future__ import annotations

from typing import Any, assert_type

import surefoot_lab as lab
from surefoot.durable import App, RunHandle, Workflow
from surefoot_lab.agent import AgentServices, build_agent, start_agent


def the_lab() -> None:
    """Running one experiment from Python, and the demo agent."""
    with lab.context(seeds=2) as ctx:
        assert_type(ctx, lab.LabContext)
        result = lab.get("resilience.waits").run(ctx)
        assert_type(result, lab.LabResult)
        assert_type(result.facts, dict[str, Any])
    app = App("sqlite:///agent.db")
    services = AgentServices("ledger.db")
    wf = build_agent(app, services)["1"]
    assert_type(wf, Workflow)
    assert_type(start_agent(app, wf, "why?", run_id="r-2"), RunHandle)

"""The 7-step agent of DESIGN §4 and its fake outside world, for the lab, docs and tests.

::

    from surefoot import durable
    from surefoot_lab import agent

    app = durable.App("sqlite:///runs.db")
    services = agent.AgentServices("ledger.db")      # counts what the fakes receive
    wf = agent.build_agent(app, services)["1"]
    handle = agent.start_agent(app, wf, "why is the sky blue?", run_id="r-1")
    print(handle.result(timeout=30))
    print(services.ledger.totals())                  # model calls, tokens, duplicate posts

``surefoot_lab.agent.chaos`` runs the agent in real worker processes and kills them.
"""

from __future__ import annotations

from ._ledger import Ledger, LedgerTotals
from ._run import approve, start_agent
from ._services import MODEL, AgentServices, PublishError
from ._workflow import APPROVE, STEPS, WORKFLOW, build_agent

__all__ = [
    "APPROVE",
    "MODEL",
    "STEPS",
    "WORKFLOW",
    "AgentServices",
    "Ledger",
    "LedgerTotals",
    "PublishError",
    "approve",
    "build_agent",
    "start_agent",
]

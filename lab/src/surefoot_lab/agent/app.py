"""A module-level app with the agent registered, for ``surefoot worker --app``.

::

    SUREFOOT_AGENT_LEDGER=ledger.db surefoot worker --db sqlite:///runs.db \
        --app surefoot_lab.agent.app:app

The journal URL comes from the worker's ``--db`` (or ``SUREFOOT_DB``); the services read
``SUREFOOT_AGENT_*`` on first use (see ``AgentServices.from_env``).
"""

from __future__ import annotations

import os

from surefoot.durable import App

from ._services import AgentServices
from ._workflow import build_agent

__all__ = ["agent", "app"]

app = App(os.environ.get("SUREFOOT_DB", "sqlite://"))
agent = build_agent(app, lambda: AgentServices.from_env(app.clock))["1"]

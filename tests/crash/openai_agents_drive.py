"""Run (or resume) one agent run of openai_agents_app in this process: ``DB RUN_ID``; prints the
answer. With ``--approve``: approve every call the run waits for, then resume it."""

from __future__ import annotations

import sys

import openai_agents_app

from surefoot.integrations.openai_agents import approve, pending_approvals

db, run_id = sys.argv[1], sys.argv[2]
openai_agents_app.app.configure(url=db)
if "--approve" in sys.argv:
    for call in pending_approvals(openai_agents_app.app, run_id):
        approve(openai_agents_app.app, run_id, call.digest, by="test")
handle = openai_agents_app.app.start(openai_agents_app.support, "refund A1", run_id=run_id)
print(handle.result(timeout=60))
openai_agents_app.app.close()

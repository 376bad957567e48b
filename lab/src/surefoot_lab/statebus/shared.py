"""Shared state for a team of agents: the ``Store`` and the policy simulator.

The names of the course's ``mini-statebus``::

    from surefoot.statebus import shared
    shared.run("optimistic", agents=6, seed=0)          # one run: a RunReport
    shared.averaged("last_writer_wins", agents=6)        # means over seeds
    st = shared.Store("sqlite:///team.db")
"""

from __future__ import annotations

from surefoot.statebus import Entry, Store

from .simulator import POLICIES, MergeCost, RunReport, assign, averaged, merge_sections, run

__all__ = [
    "POLICIES",
    "Entry",
    "MergeCost",
    "RunReport",
    "Store",
    "assign",
    "averaged",
    "merge_sections",
    "run",
]

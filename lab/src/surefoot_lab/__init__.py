"""The lab: every exercise of the course material, answered with measured tables.

Its own distribution (``surefoot-lab``, in ``lab/`` beside the product), on surefoot's
public API only. ``surefoot lab list`` (or ``surefoot-lab list``) shows the ids;
``surefoot lab run <id>|<subsystem>|all`` runs them. From Python::

    import surefoot_lab as lab
    with lab.context(seeds=5) as ctx:
        result = lab.get("resilience.waits").run(ctx)
"""

from __future__ import annotations

from ._registry import (
    FAKE_MODEL,
    NO_MODEL,
    Experiment,
    LabContext,
    LabResult,
    Table,
    context,
    experiment,
    experiments,
    get,
    select,
)
from ._report import to_json, to_markdown
from .local_model import LabModel, lab_model

__all__ = [
    "FAKE_MODEL",
    "NO_MODEL",
    "Experiment",
    "LabContext",
    "LabModel",
    "LabResult",
    "Table",
    "context",
    "experiment",
    "experiments",
    "get",
    "lab_model",
    "select",
    "to_json",
    "to_markdown",
]

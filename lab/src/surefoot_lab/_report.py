"""Render lab results as Markdown and JSON (no terminal libraries here)."""

from __future__ import annotations

import json
from typing import Any

from surefoot import __version__

from ._registry import Experiment, LabResult

__all__ = ["to_json", "to_markdown"]


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def to_markdown(results: list[tuple[Experiment, LabResult]]) -> str:
    """A Markdown report: one section per experiment, its tables, answer and parameters."""
    out = [f"# surefoot lab report (surefoot {__version__})", ""]
    for exp, res in results:
        out += [
            f"## `{exp.id}`: {exp.title}",
            "",
            f"Seed file `{exp.seed_file}`, {exp.exercise}. Model: {res.model}.",
            "",
        ]
        for t in res.tables:
            out += [f"### {t.title}", "", "| " + " | ".join(t.columns) + " |"]
            out.append("|" + "---|" * len(t.columns))
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
            if t.note:
                out += ["", t.note]
            out.append("")
        if res.answer:
            out += [f"**Answer.** {res.answer}", ""]
        params = ", ".join(f"{k}={v}" for k, v in res.params.items())
        out += [f"_Parameters: {params}_", ""]
    return "\n".join(out)


def to_json(results: list[tuple[Experiment, LabResult]]) -> str:
    """A JSON report with every table, fact, answer and parameter."""
    doc = {
        "surefoot": __version__,
        "experiments": [
            {
                "id": exp.id,
                "seed_file": exp.seed_file,
                "exercise": exp.exercise,
                "title": exp.title,
                "model": res.model,
                "answer": res.answer,
                "facts": res.facts,
                "params": res.params,
                "tables": [
                    {"title": t.title, "columns": t.columns, "rows": t.rows, "note": t.note}
                    for t in res.tables
                ],
            }
            for exp, res in results
        ],
    }
    return json.dumps(doc, indent=2, default=str)

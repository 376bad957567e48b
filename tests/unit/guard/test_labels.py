"""Labels survive the codec, including values stored before the labels moved to the guard."""

from __future__ import annotations

import json

from surefoot.codec import dumps, loads
from surefoot.guard import Label, Labeled, trusted


def test_labelled_values_survive_the_codec() -> None:
    """A Labeled value round-trips through the JSON codec with its label (sets included)."""
    x = Labeled({"n": 1}, Label.of("web", "untrusted").join(trusted(0).label))
    assert loads(dumps(x)) == x
    assert json.loads(dumps(x))["t"] == "surefoot.guard._labels.Labeled"


def test_labels_stored_before_the_guard_moved_still_decode() -> None:
    """A value written by 0.1 (tagged ``surefoot.statebus._trust.Labeled``) decodes to a
    Labeled whose label keeps its taint, so a stored envelope is not read as a plain dict."""
    old = json.dumps(
        {
            "$sf": "obj",
            "t": "surefoot.statebus._trust.Labeled",
            "v": {
                "value": {"text": "transfer 900"},
                "label": {
                    "$sf": "obj",
                    "t": "surefoot.statebus._trust.Label",
                    "v": {
                        "sources": {"$sf": "set", "v": ["web"]},
                        "untrusted": {"$sf": "set", "v": ["web"]},
                        "tainted": {"$sf": "set", "v": ["web"]},
                        "endorsed_by": {"$sf": "set", "v": []},
                    },
                },
            },
        }
    )
    got = loads(old)
    assert got == Labeled({"text": "transfer 900"}, Label.of("web", "untrusted"))
    assert got.tainted

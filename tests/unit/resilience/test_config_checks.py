"""Every number resilience objects take is checked when given: no NaN, inf, bool or bad rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from surefoot import ConfigError
from surefoot.resilience import (
    DEFAULT_CLASSIFIER,
    CircuitBreaker,
    Classifier,
    RetryBudget,
    RetryPolicy,
    faults,
)

INF, NAN = math.inf, math.nan

BAD: list[tuple[str, Callable[[], Any], str]] = [
    ("deadline=inf", lambda: RetryPolicy(deadline=INF), "pass None for no limit"),
    ("deadline=-inf", lambda: RetryPolicy(deadline=-INF), "finite"),
    ("deadline=nan", lambda: RetryPolicy(deadline=NAN), "NaN"),
    ("deadline=True", lambda: RetryPolicy(deadline=True), "True"),
    ("timeout=inf", lambda: RetryPolicy(timeout_per_attempt=INF), "pass None for no limit"),
    ("timeout='1'", lambda: RetryPolicy(timeout_per_attempt="1"), "'1'"),
    ("max_retry_after=inf", lambda: RetryPolicy(max_retry_after=INF), "finite"),
    ("max_retry_after=nan", lambda: RetryPolicy(max_retry_after=NAN), "NaN"),
    ("jitter=nan", lambda: RetryPolicy(retry_after_jitter=NAN), "finite"),
    ("jitter=2", lambda: RetryPolicy(retry_after_jitter=2), "between 0 and 1"),
    ("jitter=-0.1", lambda: RetryPolicy(retry_after_jitter=-0.1), "between 0 and 1"),
    ("jitter=True", lambda: RetryPolicy(retry_after_jitter=True), "True"),
    ("timeout_mode", lambda: RetryPolicy(timeout_mode="kill"), "'kill'"),
    ("max_attempts=True", lambda: RetryPolicy(max_attempts=True), "True"),
    ("threshold=True", lambda: CircuitBreaker(failure_threshold=True), "True"),
    ("threshold=2.0", lambda: CircuitBreaker(failure_threshold=2.0), "2.0"),  # type: ignore[arg-type]
    ("rate=nan", lambda: CircuitBreaker(failure_rate=NAN), "finite"),
    ("rate=inf", lambda: CircuitBreaker(failure_rate=INF), "finite"),
    ("rate=True", lambda: CircuitBreaker(failure_rate=True), "True"),
    ("rate=0", lambda: CircuitBreaker(failure_rate=0), "0 <"),
    ("window=True", lambda: CircuitBreaker(window=True, min_calls=1), "True"),
    ("window=2.5", lambda: CircuitBreaker(window=2.5, min_calls=1), "2.5"),  # type: ignore[arg-type]
    ("min_calls=True", lambda: CircuitBreaker(min_calls=True), "True"),
    ("reset=inf", lambda: CircuitBreaker(reset_timeout=INF), "finite"),
    ("reset=nan", lambda: CircuitBreaker(reset_timeout=NAN), "NaN"),
    ("reset=-1s", lambda: CircuitBreaker(reset_timeout=timedelta(seconds=-1)), ">= 0"),
    ("slow=inf", lambda: CircuitBreaker(slow_call_threshold=INF), "None for off"),
    ("probes=True", lambda: CircuitBreaker(half_open_probes=True), "True"),
    ("is_failure=3", lambda: CircuitBreaker(is_failure=3), "callable"),  # type: ignore[arg-type]
    ("ratio=nan", lambda: RetryBudget(NAN), "finite"),
    ("ratio=True", lambda: RetryBudget(True), "True"),
    ("max_tokens=inf", lambda: RetryBudget(max_tokens=INF), "finite"),
    ("initial=nan", lambda: RetryBudget(initial=NAN), "finite"),
    ("fail=True", lambda: faults.FailFraction(True), "True"),
    ("fail=nan", lambda: faults.FailFraction(NAN), "finite"),
    ("fail status", lambda: faults.FailFraction(0.5, status=True), "HTTP status"),
    ("fail status 5030", lambda: faults.FailFraction(0.5, status=5030), "5030"),
    ("slow=nan", lambda: faults.Slow(NAN), "NaN"),
    ("slow=inf", lambda: faults.Slow([1.0, INF]), "finite"),
    ("slow fraction", lambda: faults.Slow(1.0, fraction=INF), "finite"),
    ("drop fraction", lambda: faults.DropReply(fraction=NAN), "finite"),
    ("outage delay", lambda: faults.Outage(1, 5, delay=NAN), "NaN"),
    ("outage start", lambda: faults.Outage(True, 5), "True"),
    ("fault delay", lambda: faults.Fault(delay=-1.0), ">= 0"),
    ("fault delay inf", lambda: faults.Fault(delay=INF), "finite"),
    ("script nan", lambda: faults.Script([NAN]), "script step 0"),
    ("script True", lambda: faults.Script([None, True]), "script step 1"),
    ("script str", lambda: faults.Script(["503"]), "script step 0"),
    ("script status", lambda: faults.Script([42]), "42"),
    ("chain of a number", lambda: faults.chain(faults.Slow(1.0), 0.3), "plan"),  # type: ignore[arg-type]
    ("wrap a list", lambda: faults.wrap(len, [503]), "plan"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("case", "make", "match"), BAD, ids=[b[0] for b in BAD])
def test_bad_numbers_are_refused_when_given(case: str, make: Callable[[], Any], match: str) -> None:
    """A non-finite, NaN, bool-as-number or out-of-range value is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=match.replace("(", r"\(")) as info:
        make()
    assert str(info.value)  # a message, never a bare error


def test_none_means_no_limit_where_documented() -> None:
    """None is the one way to say 'no limit' for deadlines, timeouts and the slow threshold."""
    p = RetryPolicy(deadline=None, timeout_per_attempt=None)
    assert p.deadline is None and p.timeout_per_attempt is None
    assert CircuitBreaker(slow_call_threshold=None, failure_rate=None).slow_call_threshold is None
    assert RetryPolicy(deadline=timedelta(seconds=3)).deadline == 3.0


BAD_RULES: list[tuple[str, dict[str, Any], str]] = [
    ("status as str", {"status": {"409": (True, "retry")}}, "write 409 instead of '409'"),
    ("status verdict str", {"status": {409: "yes"}}, "409"),
    ("status verdict int", {"status": {409: (1, "retry")}}, "409"),
    ("status reason", {"status": {409: (True, 5)}}, "409"),
    ("status bool key", {"status": {True: (True, "x")}}, "True"),
    ("status out of range", {"status": {4090: (True, "x")}}, "4090"),
    ("status not mapping", {"status": [(409, True, "x")]}, "mapping"),
    ("names type key", {"names": {KeyError: (True, "x")}}, "use its name 'KeyError'"),
    ("names verdict", {"names": {"KeyError": True}}, "KeyError"),
    ("body shape", {"body": [(None, "quota", True)]}, "body rules"),
    ("body empty needle", {"body": [(None, "", True, "x")]}, "body rules"),
    ("body verdict", {"body": [(None, "quota", "no", "x")]}, "body rules"),
    ("types not a type", {"types": [("KeyError", True, "x")]}, "types rules"),
    ("types verdict", {"types": [(KeyError, None, "x")]}, "types rules"),
]


@pytest.mark.parametrize(("case", "rules", "match"), BAD_RULES, ids=[b[0] for b in BAD_RULES])
def test_classifier_rule_tables_are_checked_when_given(
    case: str, rules: dict[str, Any], match: str
) -> None:
    """extend() and Classifier() refuse a rule of the wrong shape, instead of ignoring it."""
    with pytest.raises(ConfigError, match=match):
        DEFAULT_CLASSIFIER.extend(**rules)
    with pytest.raises(ConfigError, match=match):
        Classifier(**rules)


def test_valid_extensions_still_win_over_the_defaults() -> None:
    """Well-formed rules are kept and applied; a body needle matches whatever its case."""
    c = DEFAULT_CLASSIFIER.extend(
        status={409: (True, "409: retry")}, body=[(400, "Try Again", True, "body says so")]
    )
    assert c.classify(409).retry and c.classify(409).reason == "409: retry"
    assert c.for_status(400, body="please try again later").retry
    assert not DEFAULT_CLASSIFIER.classify(409).retry

"""AgentDojo's suites as the experiment reads them: loaded, attacked, probed.

``load_suites`` reads the installed benchmark, ``attack_text`` writes an attack template's
injection, ``Environments`` loads a suite's environments as AgentDojo does (faster), and
``injection_candidates`` runs AgentDojo's own probe of which injection vectors each user
task's ground truth reads. ``agentdojo`` is imported lazily (the lab's extra).
"""

from __future__ import annotations

import warnings
from typing import Any

from .._extras import missing_extra

__all__ = [
    "BENCHMARK",
    "Environments",
    "attack_text",
    "injection_candidates",
    "load_suites",
]

BENCHMARK = "v1.2.2"


def load_suites() -> dict[str, Any]:
    """The installed AgentDojo suites of :data:`BENCHMARK`.

    Raises:
        MissingExtraError: ``agentdojo`` is not installed.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from agentdojo.task_suite.load_suites import get_suites
    except ImportError:
        raise missing_extra("agentdojo", "the AgentDojo experiment") from None
    return dict(get_suites(BENCHMARK))


def attack_text(template: str, suite: Any, goal: str) -> str:
    """The injection AgentDojo's attack ``template`` writes for ``goal`` in ``suite``."""
    from agentdojo.attacks.attack_registry import ATTACKS

    class _Pipeline:
        name = "gpt-4o-2024-05-13"  # the name AgentDojo's templates address ("GPT-4")

    attack = ATTACKS[template](suite, _Pipeline())
    return str(attack.jailbreak.format(goal=goal, user=attack.user_name, model=attack.model_name))


class Environments:
    """A suite's environments, loaded as AgentDojo's ``load_and_inject_default_environment``
    loads them (its text, formatted with the injections, validated by its model) but parsed
    with libyaml's loader when PyYAML has it, and the suite's files read once: the same
    environment (``tests/acceptance/test_agentdojo_speed.py`` compares them), ~10x faster.
    """

    def __init__(self, suite: Any) -> None:
        import yaml  # type: ignore[import-untyped]  # agentdojo's dependency, no stubs
        from agentdojo.task_suite.task_suite import read_suite_file

        self.suite = suite
        self._text = read_suite_file(suite.name, "environment.yaml", suite.data_path)
        self._defaults = suite.get_injection_vector_defaults()
        self._loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def load(self, injections: dict[str, str]) -> Any:
        import yaml
        from agentdojo.task_suite.task_suite import validate_injections

        validate_injections(injections, self._defaults)
        text = self._text.format(**dict(self._defaults, **injections))
        return self.suite.environment_type.model_validate(yaml.load(text, Loader=self._loader))


class _FastSuite:
    """``suite`` with :class:`Environments` loading its environments (for AgentDojo's probe)."""

    def __init__(self, suite: Any, envs: Environments) -> None:
        self._suite, self._envs = suite, envs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._suite, name)

    def load_and_inject_default_environment(self, injections: dict[str, str]) -> Any:
        return self._envs.load(injections)


def injection_candidates(
    suite: Any, envs: Environments | None = None
) -> dict[str, tuple[str, ...]]:
    """User task -> the injection vectors its ground truth reads (AgentDojo's own check)."""
    from agentdojo.attacks.baseline_attacks import DirectAttack

    # no pipeline: only its ground-truth probe is used
    probe = DirectAttack(_FastSuite(suite, envs or Environments(suite)), None)
    out: dict[str, tuple[str, ...]] = {}
    for uid, u in suite.user_tasks.items():
        try:
            out[uid] = tuple(probe.get_injection_candidates(u))
        except ValueError:  # AgentDojo: "not injectable"
            out[uid] = ()
    return out

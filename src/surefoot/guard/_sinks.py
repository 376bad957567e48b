"""The sink policy: tainted values never reach a tool not declared safe, nor an instruction.

Deny by default: a tool missing from the configuration is guarded, so it cannot be reached
with untrusted data (fail closed). A call chosen by a model that read tainted data is refused
too, even when its arguments look clean. :class:`~surefoot.guard.CapabilityPolicy` is the
finer control: it says per argument which sources may supply it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError, TrustError
from ._labels import Label, Labeled

__all__ = ["SinkPolicy"]


class SinkPolicy:
    """Refuse tainted values at every tool not declared safe, and at instructions.

    Deny by default: a tool you did not list in ``safe`` is guarded, so a tool forgotten in
    the configuration cannot be reached with untrusted data (fail closed). Declare safe only
    tools that cannot act on the world or on what people read (a calculator, a lookup).

    Args:
        safe: tool names whose calls always pass, even under untrusted context.
        consequential: deprecated and ignored (every tool not in ``safe`` is guarded now);
            kept for one release so ``SinkPolicy({...})`` keeps working, with a warning.

    Example:
        ``SinkPolicy(safe={"search", "calculator"})`` guards ``send_email``, ``transfer``
        and any tool added later.
    """

    __slots__ = ("safe",)

    def __init__(
        self, consequential: Iterable[str] | None = None, *, safe: Iterable[str] = ()
    ) -> None:
        if consequential is not None:
            warnings.warn(
                "SinkPolicy(consequential=...) is ignored: every tool not declared safe is "
                "guarded now. Drop the argument, and list tools that may run under untrusted "
                "context with SinkPolicy(safe={...}).",
                DeprecationWarning,
                stacklevel=2,
            )
        if isinstance(safe, str):
            raise ConfigError(
                f"safe is a set of tool names, like safe={{{safe!r}}}, got the string {safe!r}"
            )
        names = frozenset(safe)
        bad = sorted(repr(n) for n in names if not isinstance(n, str) or not n)
        if bad:
            raise ConfigError(
                f"safe must hold non-empty tool names (strings), got {', '.join(bad)}"
            )
        self.safe: frozenset[str] = names

    def guards(self, tool: str) -> bool:
        """True unless ``tool`` was declared safe."""
        return tool not in self.safe

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SinkPolicy) and other.safe == self.safe

    def __hash__(self) -> int:
        return hash(self.safe)

    def __repr__(self) -> str:
        return f"SinkPolicy(safe={sorted(self.safe)!r})"

    def check_call(
        self, tool: str, args: Mapping[str, Any], *, decided_by: Label | None = None
    ) -> None:
        """Allow a call, or raise.

        Args:
            tool: the tool's name; calls to tools declared ``safe`` always pass.
            args: argument name -> :class:`Labeled` value. Unlabelled values are refused:
                the runtime must say where each argument came from.
            decided_by: the label of what the model read when it chose this call; a call
                chosen under tainted context is refused even if its arguments look clean.

        Raises:
            TrustError: naming the tool, the argument and the untrusted sources.
        """
        if not self.guards(tool):
            return
        sink = f"tool:{tool}"
        if decided_by is not None and decided_by.tainted:
            srcs = tuple(sorted(decided_by.tainted))
            raise TrustError(
                f"{tool} was chosen by a model that read untrusted data from {list(srcs)}; "
                "a guarded call (any tool not declared safe) needs an endorsement "
                "(Endorser.endorse) or a context without untrusted entries (a scoped view)",
                sink=sink,
                sources=srcs,
            )
        for name, value in args.items():
            if not isinstance(value, Labeled):
                raise TrustError(
                    f"{tool} argument {name!r}={value!r} has no label; wrap it with "
                    "trusted(...) or pass the Labeled value it was derived from",
                    sink=sink,
                )
            if value.tainted:
                srcs = tuple(sorted(value.label.tainted))
                raise TrustError(
                    f"{tool} argument {name!r} derives from untrusted {list(srcs)}: "
                    f"{value.value!r:.80}. Endorse it first (Endorser.endorse) if it is meant.",
                    sink=sink,
                    sources=srcs,
                )

    def check_instruction(self, instruction: Labeled[Any]) -> None:
        """Allow text to be used as an instruction (a task, a next action), or raise.

        Raises:
            TrustError: the text derives from an untrusted, unendorsed source.
        """
        if not isinstance(instruction, Labeled):
            raise TrustError(
                f"instruction {instruction!r:.80} has no label; wrap it with trusted(...)",
                sink="instruction",
            )
        if instruction.tainted:
            srcs = tuple(sorted(instruction.label.tainted))
            raise TrustError(
                f"instruction {instruction.value!r:.80} derives from untrusted {list(srcs)}; "
                "show it as data, or have a trusted principal endorse it",
                sink="instruction",
                sources=srcs,
            )

    def allows(
        self, tool: str, args: Mapping[str, Any], *, decided_by: Label | None = None
    ) -> bool:
        """True if :meth:`check_call` would pass."""
        try:
            self.check_call(tool, args, decided_by=decided_by)
        except TrustError:
            return False
        return True

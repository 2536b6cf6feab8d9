"""Runs the examples in rounds: all of them in order, then again those whose call failed, while the round
before passed at least one.

An example may need what another tool's example makes: memory_create stores into the structure
memory_structure_create's example creates, and name order runs it first. Rather than a dependency language,
a failed call gets another chance once every other example has run, and again as long as something new
passed (each round is shorter, so it ends). Only failed calls are run again: a call that succeeded but gave
the wrong output did what it does, and running it twice would only do it twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .cases import CheckCase
from .expectations import CallOutcome, unmet


@dataclass(frozen=True, slots=True)
class CaseResult:
    """How one example fared. `problems` is empty when it passed; `outcome` None for a skipped one, whose
    `case.skip_reason` says why. `round` is the round of its last run (1 for the first)."""

    case: CheckCase
    outcome: CallOutcome | None
    problems: tuple[str, ...]
    round: int
    duration_ms: float

    @property
    def status(self) -> str:
        if self.outcome is None:
            return "skipped"
        return "failed" if self.problems else "passed"


def run_rounds(cases: Sequence[CheckCase], call: Callable[[CheckCase], CallOutcome],
               on_result: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """The result of each of `cases`, in their order; `call` makes one call. `on_result` hears each run's
    result as it comes (a retried example once per round)."""
    results: dict[int, CaseResult] = {
        index: CaseResult(case, None, (), 0, 0.0) for index, case in enumerate(cases) if case.skip_reason}
    pending = [index for index, case in enumerate(cases) if not case.skip_reason]
    round_number = 0
    while pending:
        round_number += 1
        retry = []
        passed_any = False
        for index in pending:
            case = cases[index]
            started = time.monotonic()
            outcome = call(case)
            result = CaseResult(case, outcome, tuple(unmet(case.expect, outcome)), round_number,
                                (time.monotonic() - started) * 1000)
            results[index] = result
            if on_result is not None:
                on_result(result)
            if not result.problems:
                passed_any = True
            elif not outcome.success and case.expect.success:
                retry.append(index)
        pending = retry if passed_any else []
    return [results[index] for index in range(len(cases))]

"""The task's own tests as a search's value function (`--value oracle`), for upper-bound
studies: how well would a strategy do if its value function were the verifier itself?

**An oracle, not a strategy: it leaks the verifier.** Each partial trajectory is scored
by running the task's verifier on a fork of the environment it ran in (the trajectory's
own environment is left as it was: a verifier ends its processes): 10 when the tests
pass, 0 when they do not. A search guided by it sees, at every turn, what the final
verdict will see, so its pass rate bounds what a value function could reach; it says
nothing of a strategy a real run could use. A setting it guides is labelled
`value=oracle` in the run folder and the report.

It calls no model (no tokens), but each score costs a fork and a verification: the
tree file's value calls and the spend table's forks count them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.records import Usage
from turnbon_graph.selectors.model_call import Asked

if TYPE_CHECKING:
    from turnbon_graph.bench.metering.budget import Ledger
    from turnbon_graph.bench.values.valuing import ValueSetup

PASSED, FAILED = 10.0, 0.0


class TestsOracle:
    """Scores a partial trajectory 10 when the task's tests pass on a fork of its
    environment, 0 when they fail (see the module: an oracle that leaks the verifier).

    Args:
        verifier_timeout_s: the most seconds one verification takes.
        ledger: the episode's ledger, which counts the forks it makes.
    """

    __test__ = False  # not a pytest test class, whatever its name

    name = "oracle:tests"

    def __init__(self, verifier_timeout_s: float, ledger: Ledger | None = None) -> None:
        self.verifier_timeout_s = verifier_timeout_s
        self.ledger = ledger
        self.verify_s = 0.0
        """Seconds spent verifying forks."""

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        return 0  # no model is asked

    async def score(self, messages: Sequence[BaseMessage], episode: Episode) -> Asked[float]:
        fork = getattr(episode, "fork", None)
        if fork is None:
            return _failed(
                f"the oracle value verifies a fork of the trajectory's environment, and "
                f"{type(episode).__name__} episodes do not fork"
            )
        try:
            copy: Episode = await fork()
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            return _failed(
                f"the oracle could not fork the environment: {type(exc).__name__}: {exc}"
            )
        if self.ledger is not None:
            self.ledger.forks += 1
        started = time.monotonic()
        try:
            verdict = await asyncio.wait_for(copy.verify(), self.verifier_timeout_s)
        except Exception as exc:
            if not is_agent_failure(exc) and not isinstance(exc, TimeoutError):
                raise
            return _failed(f"the oracle's verifier failed: {type(exc).__name__}: {exc}")
        finally:
            await copy.close()
            self.verify_s += time.monotonic() - started
        if verdict.error is not None:
            return _failed(f"the oracle's verifier failed: {verdict.error}")
        answer = "the tests pass" if verdict.passed else "the tests fail"
        return Asked(PASSED if verdict.passed else FAILED, answer, Usage(), attempts=1)


def _failed(error: str) -> Asked[float]:
    return Asked(None, None, Usage(), error, 1)


def tests_oracle(setup: ValueSetup) -> TestsOracle:
    """`--value oracle`: the task's tests, within its verifier's time limit."""
    return TestsOracle(setup.task.verifier_timeout_s, setup.ledger)

"""An episode of a task in a container: the agent's `shell` tool, then the verifier run
the way Harbor runs Terminal-Bench 2's.

After the agent, the processes it left keep running (a task may ask for a server), the
old reward files are removed, the task's `tests/` is copied to `/tests`, and
`(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1` runs in the working directory as
the image's user, with `[verifier] env`, within `[verifier] timeout_sec`
(`timeout -s KILL` inside the container). Its exit code is ignored: the reward file is
the verdict (`turnbon_terminal.reward`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

from langchain_core.tools import BaseTool

from turnbon_graph.bench.environment import Verdict
from turnbon_graph.errors import ConfigurationError, ResourceLimitError
from turnbon_terminal.container import VERIFIER_LOGS, Container
from turnbon_terminal.engine import ContainerError
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.result import CommandResult
from turnbon_terminal.reward import REWARD_JSON, REWARD_TEXT, TEST_OUTPUT, reward_verdict
from turnbon_terminal.shell_tool import ShellTool
from turnbon_terminal.tasks import TerminalTask
from turnbon_terminal.tb2 import TEST_SCRIPT

TESTS = "/tests"
SOLUTION = "/solution"
VERIFIER_MARGIN_S = 2.0
"""The verifier's own limit ends this much before the runner's (as in the host sandbox)."""
STEP_LIMIT_S = 60.0
"""The time limit of each of the verifier's own steps (removing, copying, chmod)."""


class ContainerEpisode:
    """One attempt at one task, in a container of its own."""

    def __init__(self, task: TerminalTask, container: Container) -> None:
        self.task = task
        self.container = container
        self._tools: list[BaseTool] = [ShellTool(container)]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    @property
    def location(self) -> str:
        """Where the working directory is, in words (it is not on this machine)."""
        return f"{self.container.workdir} of the container {self.container.name}"

    async def export_workdir(self, target: Path) -> list[str]:
        """Copies the working directory out of the container to the new folder
        `target` (`turnbon run --keep-workdir`); returns what the copy lacks (nothing:
        the engine copies every file as it is)."""
        await self.container.copy_out(self.container.workdir, target)
        return []

    async def run(self, command: str, *, time_limit: float | None = None) -> CommandResult:
        """A command as the agent would run it (for tests, scripts and oracles)."""
        return await self.container.run(command, time_limit=time_limit)

    async def run_solution(self) -> CommandResult:
        """The task's solution, as Harbor's oracle runs it: solution/ copied to
        /solution, then /solution/solve.sh run in the working directory."""
        if self.task.solution_script is None:
            raise ConfigurationError(f"task {self.task.id} has no solution/solve.sh")
        await self.container.copy_in(self.task.solution_script.parent, SOLUTION)
        return await self.container.execute(
            ["bash", "-c", f"chmod +x {SOLUTION}/solve.sh && {SOLUTION}/solve.sh"],
            time_limit=self.task.spec.agent_timeout_s,
            env={"DEBIAN_FRONTEND": "noninteractive", **self.task.solution_env},
        )

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over, after its last command."""
        return self.container.over_budget

    async def verify(self) -> Verdict:
        """Runs tests/test.sh and reads its reward; raises `ResourceLimitError` instead
        when the episode went over its budget before."""
        if over := await self.container.check_budget():
            raise ResourceLimitError(f"the episode went over its budget: {over}")
        if not self.task.has_test_script:
            return Verdict(
                passed=False,
                error=f"task {self.task.id} has no tests/{TEST_SCRIPT}: a container task is "
                "verified by its test.sh, which writes /logs/verifier/reward.txt",
            )
        limit = self.task.spec.verifier_timeout_s
        limit = max(limit - min(VERIFIER_MARGIN_S, limit / 10), 0.5)
        deadline = time.monotonic() + limit
        try:
            result = await self._run_tests(deadline)
        except (ContainerError, SandboxError) as exc:
            return Verdict(passed=False, error=f"the tests could not run: {exc}")
        timed_out = limit if result.timed_out else None
        verdict = await asyncio.to_thread(
            reward_verdict,
            self.container.verifier_logs,
            timed_out=timed_out,
            network=self.container.network,
        )
        if (over := await self.container.check_budget()) and verdict.error is None:
            # The tests went over the episode's memory or storage: never a PASS.
            reason = f"the tests went over the episode's budget: {over}"
            verdict = verdict.model_copy(update={"passed": False, "reason": reason})
        return verdict

    async def _run_tests(self, deadline: float) -> CommandResult:
        logs = self.container.verifier_logs
        old = [f"{VERIFIER_LOGS}/{name}" for name in (REWARD_JSON, REWARD_TEXT, TEST_OUTPUT)]
        cleared = await self.container.execute(
            ["rm", "-rf", "--", TESTS, *old], time_limit=STEP_LIMIT_S
        )
        for name in (REWARD_JSON, REWARD_TEXT, TEST_OUTPUT):
            with contextlib.suppress(FileNotFoundError):
                (logs / name).unlink()  # never follows a link: removes the link itself
        if not cleared.ok:
            raise ContainerError(f"could not remove the old /tests: {cleared.render()[-500:]}")
        await self.container.copy_in(self.task.tests_dir, TESTS)
        await self.container.execute(["chmod", "+x", f"{TESTS}/{TEST_SCRIPT}"], time_limit=60)
        left = max(deadline - time.monotonic(), 1.0)
        command = f"({TESTS}/{TEST_SCRIPT}) > {VERIFIER_LOGS}/{TEST_OUTPUT} 2>&1"
        return await self.container.execute(
            ["bash", "-c", command], time_limit=left, env=self.task.verifier_env
        )

    async def fork(self) -> ContainerEpisode:
        """Not available for container tasks yet: search strategies that fork
        (beam, particle, lookahead) need the host sandbox."""
        raise SandboxError(
            f"forking an episode is not supported for container tasks yet (task "
            f"{self.task.id} runs in a container): use --strategy bon with it, or a task "
            "for the host sandbox"
        )

    async def close(self) -> None:
        """Removes the container, its volume and the image built for it."""
        await self.container.close()

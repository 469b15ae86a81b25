"""A tiny Environment for runner tests: each task asks to bring a counter to a target.

It is a user-side implementation of the `Environment` protocol (as an integration would
write one), with real LangChain tools and a real verifier."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool, tool

from turnbon_graph.bench.environment import TaskSpec, Verdict


class CounterEpisode:
    def __init__(self, target: int) -> None:
        self.value = 0
        self.target = target
        self.closed = False

        @tool
        def increment(by: int) -> str:
            """Add `by` to the counter and return its new value."""
            self.value += by
            return f"counter is {self.value}"

        self._tools: list[BaseTool] = [increment]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    async def verify(self) -> Verdict:
        return Verdict(passed=self.value == self.target, output=f"value {self.value}")

    async def close(self) -> None:
        self.closed = True


class CounterEnvironment:
    name = "counter"

    def __init__(
        self,
        targets: dict[str, int],
        follow_ups: list[str] | None = None,
        agent_timeout_s: float = 30,
    ) -> None:
        self.targets = targets
        self.follow_ups = follow_ups or []
        self.agent_timeout_s = agent_timeout_s
        self.episodes: list[CounterEpisode] = []

    def tasks(self) -> Sequence[TaskSpec]:
        return [
            TaskSpec(
                id=task,
                instruction=f"Bring the counter to {target}.",
                follow_ups=self.follow_ups,
                agent_timeout_s=self.agent_timeout_s,
                max_turns=5,
            )
            for task, target in self.targets.items()
        ]

    async def start(self, task: TaskSpec, trial: int) -> CounterEpisode:
        episode = CounterEpisode(self.targets[task.id])
        self.episodes.append(episode)
        return episode

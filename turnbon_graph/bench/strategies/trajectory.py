"""A trajectory of a search: its messages, the environment it runs in, its place in the
tree and its value; and one step of it, the chosen action executed in that environment
as the agent graph would (`graph.agent_graph`: its tools node, its answers to invalid
calls, its turn limit and follow-up user messages)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnbon_graph.bench.environment import Episode, TaskSpec
from turnbon_graph.bench.metering.budget import request_chars
from turnbon_graph.bench.strategies.selection import Entry
from turnbon_graph.openai.messages import to_openai_messages
from turnbon_graph.selectors.base import Selection
from turnbon_graph.turn.candidates import Candidate
from turnbon_graph.turn.tool_errors import invalid_call_results, turns_since_human


@dataclass
class Trajectory:
    """One partial trajectory of a search: its messages, its live episode, its place in the tree."""

    messages: list[BaseMessage]
    episode: Episode
    node: str
    """The tree node of its last step."""
    fork: str
    """Its environment's id in the tree file."""
    segments: list[str]
    """The user messages still to come after the one it is answering."""
    value: float | None = None
    ended: str | None = None
    """How it ended ("final answer", "turn limit", "token budget"), or None while live."""
    turns: int = 0
    copies: int = 1
    """Particle filtering: the slots of the pool a finished particle fills (how often
    the last resampling drew it)."""

    @property
    def score(self) -> float:
        """Its value for ranking: an unscored trajectory ranks below every scored one."""
        return -math.inf if self.value is None else self.value

    def entry(self) -> Entry:
        """It as the selection rules see it."""
        return Entry(self.value, self.ended is not None, self.copies)


@dataclass
class Pick:
    """A selector that takes the candidate proposing `action`: how a search records the
    child it is building as the turn's choice, with the turn's full record."""

    name: str
    action: str

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        index = next(p for p, c in enumerate(candidates) if c.action == self.action)
        return Selection(index=index, selector=self.name)


async def run_tools(episode: Episode, messages: list[BaseMessage]) -> list[ToolMessage]:
    """The tool results of the last message's calls, run in `episode` by LangGraph's
    tools node with the agent graph's error handling."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(list(episode.tools), handle_tool_errors=True))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    state = await builder.compile().ainvoke({"messages": messages})
    return [m for m in state["messages"][len(messages) :] if isinstance(m, ToolMessage)]


async def take_step(
    parent: Trajectory, message: AIMessage, episode: Episode, fork: str, node: str, task: TaskSpec
) -> Trajectory:
    """`parent` extended by the chosen `message`, executed in `episode` (the parent's own
    or a fork of it): its observation is real. An answer without tool calls ends the
    user message: the next follow-up is sent, or the trajectory ends; so does the turn
    limit."""
    messages = [*parent.messages, message]
    results = invalid_call_results(message)
    if not results and message.tool_calls:
        results = await run_tools(episode, messages)
    messages += results
    child = Trajectory(
        messages=messages,
        episode=episode,
        node=node,
        fork=fork,
        segments=list(parent.segments),
        turns=parent.turns + 1,
    )
    answered = not message.tool_calls and not message.invalid_tool_calls
    if answered or turns_since_human(messages) >= task.max_turns:
        if child.segments:
            child.messages.append(HumanMessage(child.segments.pop(0)))
        else:
            child.ended = "final answer" if answered else "turn limit"
    return child


def step_size(child: Trajectory, parent: Trajectory) -> int:
    """Characters the step added (its action and observation), for the budget's estimates."""
    return request_chars(to_openai_messages(child.messages[len(parent.messages) :]))


def describe(message: AIMessage) -> tuple[str, list[str]]:
    """An action's text and its calls as short strings, for the tree file."""
    calls = []
    for call in message.tool_calls:
        args = call["args"]
        values = list(args.values()) if isinstance(args, dict) else []
        shown = values[0] if len(values) == 1 and isinstance(values[0], str) else json.dumps(args)
        calls.append(f"{call['name']}: {shown}")
    return str(message.content), calls

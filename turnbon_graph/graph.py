"""The LangGraph entry points: a Turn-BoN turn as a subgraph, and a whole agent loop.

Both return an uncompiled `StateGraph`, as LangGraph's own add-ons do: compile it with
your checkpointer, store and name. Their nodes run under `invoke`/`stream` as under
`ainvoke`/`astream` (the sync side runs the same coroutine through `run_sync`), so a
sync checkpointer such as `SqliteSaver` works too.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable, Sequence
from typing import Any, Literal, NotRequired, Unpack

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import is_typeddict

from turnbon_graph._sync import run_sync
from turnbon_graph.config import TurnConfig, TurnOptions, takes_turn_options
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.openai.messages import ToolLike, to_openai_tools
from turnbon_graph.turn.engine import EventSink, TurnEngine
from turnbon_graph.turn.generator import ModelPool
from turnbon_graph.turn.state import GeneratedTurn
from turnbon_graph.turn.tool_errors import invalid_call_results, turns_since_human

Tools = Sequence[ToolLike] | ToolNode
ToolErrors = bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]
"""What `ToolNode(handle_tool_errors=...)` takes: which tool exceptions become error
`ToolMessage`s for the model (True: all of them), and what they say."""


class TurnBoNState(MessagesState):
    """MessagesState plus the candidates waiting between the generate and select nodes.

    The extra key is private to the Turn-BoN graph: it is the input of those two nodes
    only, never part of the graph's input, output or the state its tools are shown, so
    the graph drops into any parent graph that has `messages`.
    """

    turnbon_pending: NotRequired[dict[str, Any] | None]


@takes_turn_options
def create_turnbon_graph(
    model: ModelPool,
    tools: Tools | None = None,
    *,
    execute_tools: bool = True,
    name: str = "turnbon",
    config: TurnConfig | None = None,
    **options: Unpack[TurnOptions],
) -> StateGraph[Any, Any, Any, Any]:
    """One Turn-BoN turn as a graph: `generate` -> `select` [-> `tools`].

    The chosen message carries its turn record in `response_metadata["turnbon"]`.
    Progress goes out as custom stream events (`stream_mode="custom"`).

    Args:
        model: a LiteLLM model id, or a mixed pool: a list of ids and
            `ModelSpec(model=..., n=..., completion_kwargs=...)` (per-model counts and
            settings such as temperature); candidate i comes from slot i % slots.
        tools: `BaseTool`s, callables or a `ToolNode`; always offered to the generator.
        execute_tools: with tools, the graph's own `tools` node runs the chosen calls.
            False makes the compiled graph a drop-in model node for a parent graph that
            has its own `ToolNode` and `tools_condition`.
        name: tags this graph's custom stream events (`"source"`).
        config: a ready `TurnConfig`; None starts from the defaults.
        **options: any `TurnConfig` option by name (n, selector, completion_kwargs,
            ...), over `config`; `TurnConfig` describes each one.

    Returns:
        The uncompiled graph (`MessagesState` plus the candidates between its nodes,
            `TurnBoNState`): compile it with your checkpointer, store and name.

    Raises:
        ConfigurationError: an option is unknown or has a bad value, or `tools` is a
            single tool rather than a list or a `ToolNode`.
    """
    engine = TurnEngine.from_options(model, config=config, **options)
    tool_list = _tool_list(tools)
    builder = _turn_builder(
        engine, tool_list, name, answer_invalid=bool(tool_list) and execute_tools
    )
    if tool_list and execute_tools:
        builder.add_node("tools", _tool_node(tools))
        # An action that cannot run gets its error results in `select`: the last message
        # is then no tool call, and the subgraph ends.
        builder.add_conditional_edges("select", tools_condition, {"tools": "tools", END: END})
        builder.add_edge("tools", END)
    else:
        builder.add_edge("select", END)
    return builder


@takes_turn_options
def create_turnbon_agent(
    model: ModelPool,
    tools: Tools,
    *,
    max_turns: int = 50,
    name: str = "turnbon",
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    handle_tool_errors: ToolErrors | None = None,
    config: TurnConfig | None = None,
    **options: Unpack[TurnOptions],
) -> StateGraph[Any, Any, Any, Any]:
    """A whole tool-using agent with Turn-BoN at every turn.

    Loops `generate` -> `select` -> `tools` until the chosen action calls no tool, or
    `max_turns` actions have run since the last human message (the loop then stops
    after that action's tool results, so the thread can be continued). A turn whose
    every candidate had unparseable tool-call arguments runs nothing: the model is told
    each parse error as an error `ToolMessage`, and the loop goes on.

    Args:
        model: a LiteLLM model id, or a mixed pool (as in `create_turnbon_graph`).
        tools: `BaseTool`s, callables or a `ToolNode`: at least one tool.
        max_turns: actions to run since the last human message before the loop stops.
        name: tags this graph's custom stream events (`"source"`).
        state_schema: the graph's state, a TypedDict with `messages` (a `MessagesState`
            subclass, say) whose other keys the graph keeps: the input and output, the
            state tools get through `InjectedState`, and what a tool's `Command(update=...)`
            writes. Default `MessagesState`.
        context_schema: the run's context (`invoke(..., context=...)`, a dict coerced to
            it), which tools read as `runtime.context` (`ToolRuntime`).
        handle_tool_errors: passed to the `ToolNode` built from `tools`: by default
            (None: True) a tool that raises is reported to the model as an error
            `ToolMessage` instead of ending the run; False lets the exception through;
            a string, a callable or exception types as `ToolNode` takes them. A
            `ToolNode` given as `tools` keeps its own setting.
        config: a ready `TurnConfig`; None starts from the defaults.
        **options: any `TurnConfig` option by name (n, selector, completion_kwargs,
            ...), over `config`; `TurnConfig` describes each one.

    Returns:
        The uncompiled agent graph: compile it with your checkpointer, store and name.

    Raises:
        ConfigurationError: an option is unknown or has a bad value, there is no tool,
            `max_turns` is not a whole number >= 1, or `handle_tool_errors` is given with
            a `ToolNode`.
    """
    engine = TurnEngine.from_options(model, config=config, **options)
    return agent_graph(
        engine,
        tools,
        max_turns=max_turns,
        name=name,
        state_schema=state_schema,
        context_schema=context_schema,
        handle_tool_errors=handle_tool_errors,
    )


def agent_graph(
    engine: TurnEngine,
    tools: Tools,
    *,
    max_turns: int = 50,
    name: str = "turnbon",
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    handle_tool_errors: ToolErrors | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """`create_turnbon_agent` around an existing engine: many agents (one per benchmark
    episode, each with its own tools) then share one engine's concurrency cap and rate
    limit."""
    if isinstance(tools, ToolNode) and handle_tool_errors is not None:
        raise ConfigurationError(
            "handle_tool_errors applies to the ToolNode built from a list of tools; "
            "the ToolNode given as tools keeps its own: set it there"
        )
    if not isinstance(max_turns, int) or max_turns < 1:
        raise ConfigurationError(f"max_turns must be a whole number >= 1, got {max_turns!r}")
    tool_list = _tool_list(tools)
    if not tool_list:
        raise ConfigurationError(
            "create_turnbon_agent needs at least one tool; for tool-free turns use "
            "create_turnbon_graph(model) or ChatTurnBoN"
        )
    builder = _turn_builder(
        engine, tool_list, name, _state_schema(state_schema), context_schema, answer_invalid=True
    )
    errors = True if handle_tool_errors is None else handle_tool_errors
    builder.add_node("tools", _tool_node(tools, errors))

    def after_tools(state: MessagesState) -> Literal["generate", "__end__"]:
        if turns_since_human(state["messages"]) >= max_turns:
            return "__end__"
        return "generate"

    def after_select(state: MessagesState) -> Literal["tools", "generate", "__end__"]:
        if isinstance(state["messages"][-1], ToolMessage):  # the action could not run
            return after_tools(state)
        return tools_condition(state["messages"])

    routes: dict[Hashable, str] = {"tools": "tools", "generate": "generate", END: END}
    builder.add_conditional_edges("select", after_select, routes)
    builder.add_conditional_edges("tools", after_tools, {"generate": "generate", END: END})
    return builder


def _tool_list(tools: Tools | None) -> list[ToolLike]:
    if tools is None:
        return []
    if isinstance(tools, ToolNode):
        return list(tools.tools_by_name.values())
    if isinstance(tools, BaseTool) or callable(tools):
        raise ConfigurationError("tools must be a list of tools or a ToolNode, not a single tool")
    return list(tools)


def _tool_node(tools: Tools | None, handle_tool_errors: ToolErrors | None = None) -> ToolNode:
    """The given `ToolNode`, or one built from the tools (`ToolNode`'s own error handling
    unless `handle_tool_errors` is given)."""
    if isinstance(tools, ToolNode):
        return tools
    if handle_tool_errors is None:
        return ToolNode(_tool_list(tools))
    return ToolNode(_tool_list(tools), handle_tool_errors=handle_tool_errors)


def _state_schema(state_schema: type[Any] | None) -> type[Any]:
    if state_schema is None:
        return MessagesState
    if not is_typeddict(state_schema) or "messages" not in state_schema.__annotations__:
        raise ConfigurationError(
            f"state_schema must be a TypedDict with a `messages` key (a MessagesState "
            f"subclass, say), got {state_schema!r}"
        )
    return state_schema


def _turn_builder(
    engine: TurnEngine,
    tool_list: list[ToolLike],
    name: str,
    state_schema: type[Any] = MessagesState,
    context_schema: type[Any] | None = None,
    *,
    answer_invalid: bool = False,
) -> StateGraph[Any, Any, Any, Any]:
    """`generate` -> `select`. With `answer_invalid` (the graph runs the tools), a chosen
    action with unparseable tool-call arguments comes with its error results."""
    openai_tools = to_openai_tools(tool_list) if tool_list else None

    def events() -> EventSink:
        write = get_stream_writer()
        return lambda event: write({**event, "source": name})

    async def generate(state: TurnBoNState) -> dict[str, Any]:
        turn = await engine.generate(state["messages"], tools=openai_tools, on_event=events())
        return {"turnbon_pending": turn.to_state()}

    async def select(state: TurnBoNState) -> dict[str, Any]:
        pending = state.get("turnbon_pending")
        if not pending:
            raise ConfigurationError("the select node ran without candidates from generate")
        turn = GeneratedTurn.from_state(pending)
        message = await engine.select(state["messages"], turn, on_event=events())
        results = invalid_call_results(message) if answer_invalid else []
        return {"messages": [message, *results], "turnbon_pending": None}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state_schema, context_schema)
    # Both nodes read the private key, so only they carry it in their input schema.
    builder.add_node("generate", _node(generate), input_schema=TurnBoNState)
    builder.add_node("select", _node(select), input_schema=TurnBoNState)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "select")
    return builder


def _node(
    afunc: Callable[[TurnBoNState], Coroutine[Any, Any, dict[str, Any]]],
) -> RunnableCallable:
    """A node that runs `afunc` under `ainvoke`/`astream`, and the same coroutine through
    `run_sync` under `invoke`/`stream` (LangGraph picks the side, as for its own agents).
    The coroutine runs in this context, so the stream writer and `interrupt` work."""

    def func(state: TurnBoNState) -> dict[str, Any]:
        return run_sync(afunc(state))

    return RunnableCallable(func, afunc, name=afunc.__name__, trace=False)

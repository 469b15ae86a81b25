"""`TurnBoNAgent`: Terminus-2's shell agent for Harbor, with Turn-BoN turns.

The loop is Terminus-2's (Harbor 0.26): a tmux session in the task's container, its
prompt template and JSON answer format read by its own parser, commands typed as
keystrokes with their waits, the terminal's new output as the next observation, a
parse-error answer fed back without running anything, and "task_complete" asked to be
confirmed once. Each turn is a `TurnEngine` turn: N candidate answers, one chosen by the
selector (`actions.TerminusActions` makes answers that would type the same keys one
action). The model is called from the host, where Harbor runs; only keystrokes reach the
container, and no key does.

It mirrors the loop rather than subclassing `Terminus2` and swapping its private `_llm`:
Terminus-2 also calls that LLM for its context summaries (each would become a Turn-BoN
turn of N samples and a selector call), its token counts come from its chat object, not
from the turn records, and its internals change between releases. This agent uses only
`BaseAgent`, `TmuxSession`, the parser and the prompt template (and Harbor's ATIF models
for `trajectory.json`, in `turnbon_harbor.trajectory`). A context overflow ends the trial
as Harbor's `ContextLengthExceededError` (the paper's "out of context").
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import itertools
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.terminus_2.terminus_json_plain_parser import ParseResult
from harbor.agents.terminus_2.tmux_session import TmuxSession
from harbor.environments.base import BaseEnvironment
from harbor.llms.base import ContextLengthExceededError
from harbor.models.agent.context import AgentContext
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from turnbon_graph.bench.episode import CONTEXT_OVERFLOW
from turnbon_graph.cli.models import check_credentials
from turnbon_graph.errors import AllCandidatesFailedError, ConfigurationError
from turnbon_graph.records import RECORD_KEY, TurnRecord
from turnbon_graph.turn.candidates import candidate_text
from turnbon_graph.turn.engine import TurnEngine
from turnbon_harbor.actions import TerminusActions, parse_answer
from turnbon_harbor.options import AgentOptions, agent_options, user_kwargs
from turnbon_harbor.trajectory import TrajectoryFile
from turnbon_harbor.turn_log import TURNS_FILE, TurnFile, TurnTotals, selector_model

TEMPLATES = files("harbor.agents.terminus_2") / "templates"
OUTPUT_LIMIT = 10_000
"""Bytes of terminal output an observation keeps, first and last halves (Terminus-2's)."""
MAX_WAIT_S = 60.0
"""The longest wait a command may ask for (Terminus-2's)."""
SESSION = "turnbon"


class TurnBoNAgent(BaseAgent):
    """Harbor agent: `harbor run -a turnbon_harbor:TurnBoNAgent -m MODEL --ak n=4 ...`.

    `--ak` takes every `TurnConfig` option (n, selector, completion_kwargs, seed,
    adaptive, ...) and the agent's own (`options.AgentSettings`: max_turns, api_base,
    pane_width, pane_height). Keys come from the environment of the `harbor` process.
    Each trial's agent folder gets `turns.jsonl` and Harbor's `trajectory.json` (ATIF)."""

    capabilities = AgentCapabilities(atif=True)

    def __init__(self, logs_dir: Path, model_name: str | None = None, **kwargs: Any) -> None:
        user, framework = user_kwargs(kwargs, BaseAgent.__init__)
        super().__init__(logs_dir=logs_dir, model_name=model_name, **framework)
        # not `self.options`: that is Harbor's own (its options model; None here)
        self.turnbon: AgentOptions = agent_options(user)
        self._session: TmuxSession | None = None
        self._templates: dict[str, str] = {}

    @staticmethod
    def name() -> str:
        return "turnbon"

    def version(self) -> str | None:
        return importlib.metadata.version("turnbon-graph")

    @classmethod
    def preflight(
        cls, kwargs: dict[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        """Checks the `--ak` options once, before any container starts."""
        user = {k: v for k, v in (kwargs or {}).items() if k != "base_url"}
        if (kwargs or {}).get("base_url") is not None:
            raise ConfigurationError("--base-url is not taken: pass --ak api_base=URL")
        agent_options(user)

    @classmethod
    def check_model_credentials(cls, connection: Any, *, kwargs: dict[str, Any], **_: Any) -> None:
        """Refuses, before any container starts, a missing `-m`, a model id LiteLLM
        cannot route, or a provider key that is not in the environment."""
        model = kwargs.get("model_name")
        if not model:
            raise ConfigurationError("pass the model with -m PROVIDER/MODEL (a LiteLLM model id)")
        user, _framework = user_kwargs(kwargs, BaseAgent.__init__)
        config = agent_options(user).config
        check_credentials(
            model,
            dict(config.completion_kwargs or {}),
            config.selector,
            dict(config.selector_kwargs or {}) if config.selector_kwargs is not None else None,
        )

    async def setup(self, environment: BaseEnvironment) -> None:
        """Starts the tmux session in the container (tmux comes with the image, or
        Harbor installs it) and reads Terminus-2's templates."""
        for name in ("terminus-json-plain.txt", "timeout.txt"):
            self._templates[name] = await asyncio.to_thread((TEMPLATES / name).read_text)
        settings = self.turnbon.settings
        self._session = TmuxSession(
            session_name=SESSION,
            environment=environment,
            logging_path=self.environment_logs_dir / f"{SESSION}.pane",
            local_asciinema_recording_path=None,
            remote_asciinema_recording_path=None,
            pane_width=settings.pane_width,
            pane_height=settings.pane_height,
            user=environment.default_user,
        )
        await self._session.start()

    def engine(self) -> TurnEngine:
        """The turn engine on `-m`, its candidates read as Terminus actions."""
        if not self.model_name:
            raise ConfigurationError("pass the model with -m PROVIDER/MODEL (a LiteLLM model id)")
        config = self.turnbon.config
        plain = TurnEngine.from_config(self.model_name, config)
        return TurnEngine(
            generator=TerminusActions(plain.generator), selector=plain.selector, config=config
        )

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        session = self._session
        if session is None:
            raise RuntimeError("setup() must run before run()")
        engine = self.engine()
        totals = TurnTotals(
            self.turnbon.config.n,
            engine.selector.name,
            model=self.model_name,
            selector_model=selector_model(engine.selector),
        )
        turns = TurnFile(self.logs_dir / TURNS_FILE, self.logger)
        trajectory = TrajectoryFile.of(self, totals)
        screen = limit_output(await session.get_incremental_output())
        prompt = self._templates["terminus-json-plain.txt"].format(
            instruction=instruction, terminal_state=screen
        )
        await trajectory.prompt(prompt)
        messages: list[BaseMessage] = []
        confirming = False
        limit = self.turnbon.settings.max_turns
        try:
            for _ in itertools.islice(itertools.count(), limit):
                if not await session.is_session_alive():
                    break
                messages.append(HumanMessage(prompt))
                chosen = await turn(engine, messages)
                record = chosen.response_metadata[RECORD_KEY]
                turn_record = TurnRecord.model_validate(record)
                totals.add(turn_record)
                totals.fill(context)
                await turns.chosen(record)
                text = candidate_text(chosen.content)
                messages.append(AIMessage(text))
                parsed = parse_answer(text)
                await trajectory.chosen(turn_record, text, parsed)
                if parsed.error:
                    prompt = parse_error_prompt(parsed)
                    await turns.observed(prompt)
                    await trajectory.observed(prompt)
                    continue
                output = await self.execute(session, parsed)
                prompt, done = next_prompt(parsed, output, confirming)
                confirming = parsed.is_task_complete and not done
                await turns.observed(prompt)
                await trajectory.observed(prompt)
                if done:
                    break
        finally:
            await turns.close()

    async def execute(self, session: TmuxSession, parsed: ParseResult) -> str:
        """Types each command and waits its duration; the terminal's new output."""
        for command in parsed.commands:
            wait = min(command.duration, MAX_WAIT_S)
            try:
                await session.send_keys(command.keystrokes, block=False, min_timeout_sec=wait)
            except TimeoutError:
                return self._templates["timeout.txt"].format(
                    timeout_sec=wait,
                    command=command.keystrokes,
                    terminal_state=limit_output(await session.get_incremental_output()),
                )
        return limit_output(await session.get_incremental_output())


async def turn(engine: TurnEngine, messages: list[BaseMessage]) -> AIMessage:
    """One Turn-BoN turn; a context overflow of every candidate is Harbor's own
    `ContextLengthExceededError`, so the trial's ending says "out of context"."""
    try:
        return await engine.run(messages)
    except AllCandidatesFailedError as exc:
        if any(k in str(exc).lower() for k in CONTEXT_OVERFLOW):
            raise ContextLengthExceededError(str(exc)) from exc
        raise


def parse_error_prompt(parsed: ParseResult) -> str:
    """Terminus-2's answer to a reply its parser cannot read (nothing was run)."""
    feedback = f"ERROR: {parsed.error}"
    if parsed.warning:
        feedback += f"\nWARNINGS: {parsed.warning}"
    return (
        f"Previous response had parsing errors:\n{feedback}\n\n"
        "Please fix these issues and provide a proper JSON response."
    )


def next_prompt(parsed: ParseResult, output: str, confirming: bool) -> tuple[str, bool]:
    """Terminus-2's next prompt after the commands ran, and whether the agent is done:
    "task_complete" ends the run only when said twice in a row."""
    if parsed.is_task_complete:
        if confirming:
            return output, True
        return (
            f"Current terminal state:\n{output}\n\n"
            "Are you sure you want to mark the task as complete? This will trigger your "
            "solution to be graded and you won't be able to make any further corrections. "
            'If so, include "task_complete": true in your JSON response again.'
        ), False
    if parsed.warning:
        return f"Previous response had warnings:\nWARNINGS: {parsed.warning}\n\n{output}", False
    return output, False


def limit_output(output: str, max_bytes: int = OUTPUT_LIMIT) -> str:
    """`output` cut to `max_bytes`, keeping its first and last halves (Terminus-2's)."""
    data = output.encode("utf-8")
    if len(data) <= max_bytes:
        return output
    half = max_bytes // 2
    first = data[:half].decode("utf-8", errors="ignore")
    last = data[-half:].decode("utf-8", errors="ignore")
    omitted = len(data) - len(first.encode("utf-8")) - len(last.encode("utf-8"))
    return (
        f"{first}\n[... output limited to {max_bytes} bytes; "
        f"{omitted} interior bytes omitted ...]\n{last}"
    )

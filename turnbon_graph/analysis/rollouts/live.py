"""The live driver of branch rollouts: runs an episode paused before every `select`,
forks it at the chosen turns, restores the paused checkpoint in each fork with one
candidate forced, rolls out R times with the continuation policy and verifies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from turnbon_graph.analysis.rollouts.budget import Ledger, RolloutBudget, Spend
from turnbon_graph.analysis.rollouts.models import (
    BranchTurn,
    CandidateValue,
    Rollout,
    RolloutOutcome,
    RolloutReport,
    SkippedRollout,
    SkippedTurn,
)
from turnbon_graph.bench.environment import Environment, Episode, TaskSpec
from turnbon_graph.bench.running.runs import current_worker

if TYPE_CHECKING:  # analysis modules are read without paying for LangGraph
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

    from turnbon_graph.bench.episode import EpisodeEnd
    from turnbon_graph.records import TurnRecord
    from turnbon_graph.turn.candidates import Candidate
    from turnbon_graph.turn.engine import TurnEngine


@runtime_checkable
class ForkableEpisode(Episode, Protocol):
    """An episode that can be copied mid-way: what branch rollouts need."""

    async def fork(self) -> Episode:
        """A new episode of the same task and verifier whose state (working directory)
        is a copy of this one's; independent from then on, closed by the caller.

        Returns:
            The copy.
        """
        ...


def continuation_engine(engine: TurnEngine) -> TurnEngine:
    """The default continuation policy: the episode's generator, one candidate a turn,
    no selector call (what the plain agent would do from there)."""
    from turnbon_graph.config import TurnConfig
    from turnbon_graph.selectors.simple import FirstSelector
    from turnbon_graph.turn.engine import TurnEngine

    return TurnEngine(
        generator=engine.generator,
        selector=FirstSelector(),
        config=TurnConfig(n=1, prompt=engine.config.prompt),
    )


async def branch_rollouts(
    environment: Environment,
    engine: TurnEngine,
    task: TaskSpec,
    *,
    trial: int = 0,
    budget: RolloutBudget | None = None,
    continuation: TurnEngine | None = None,
    concurrency: int = 2,
    spend: Ledger | None = None,
) -> RolloutReport:
    """Runs one live episode of `task` with `engine` and branches at the budget's turns.

    At a branched turn the episode pauses after `generate`; for each distinct action
    among the candidates, R forks of the episode each restore the turn's checkpoint,
    execute that action, continue with `continuation` (default: `continuation_engine`)
    to the end, including any follow-up user messages, and are verified and closed.
    Up to `concurrency` rollouts run at once. The main episode then continues with its
    own selector, so its pick (and scores) are measured against the values.

    Args:
        environment: where the episode comes from; its episodes must fork
            (`ForkableEpisode`).
        engine: the main episode's engine (its generator and selector).
        task: the task.
        trial: the trial.
        budget: which turns to branch at and the caps; None: every turn, R=1.
        continuation: the policy the rollouts continue with; None:
            `continuation_engine(engine)`.
        concurrency: rollouts running at once.
        spend: what the budget's caps count against, a `Spend` shared with other
            episodes (or a `Ledger` shared with other processes); None: this episode's
            own.

    Returns:
        The episode's report: its outcome and every branched turn.

    Raises:
        ConfigurationError: `concurrency` is below 1, or the environment's episodes
            cannot be forked.
    """
    from turnbon_graph.errors import ConfigurationError

    budget = budget or RolloutBudget()
    continuation = continuation or continuation_engine(engine)
    spend = spend if spend is not None else Spend()
    if concurrency < 1:
        raise ConfigurationError(f"concurrency must be >= 1, got {concurrency}")
    started = time.monotonic()
    episode = await environment.start(task, trial)
    try:
        if not isinstance(episode, ForkableEpisode):
            raise ConfigurationError(
                f"episodes of environment {environment.name!r} cannot be forked (they have "
                "no async fork() method), so branch rollouts cannot copy them mid-way; "
                "implement turnbon_graph.analysis.rollouts.ForkableEpisode"
            )
        run = _LiveRun(episode, engine, continuation, task, trial, budget, spend, concurrency)
        await run.drive()
    finally:
        await episode.close()
    return RolloutReport(
        environment=environment.name,
        task=task.id,
        trial=trial,
        selector=engine.selector.name,
        n=engine.config.n,
        continuation=(
            f"{continuation.generator.label}, n={continuation.config.n}, "
            f"selector={continuation.selector.name}"
        ),
        budget=budget,
        outcome=run.outcome,
        error=run.error,
        main_turns=run.main_turns,
        turns=run.branched,
        skipped_turns=run.skipped_turns,
        tokens=sum(r.tokens for t in run.branched for r in t.rollouts),
        duration_s=round(time.monotonic() - started, 3),
        worker=current_worker(),
    )


@dataclass(frozen=True)
class _PausedTurn:
    """The main episode's turn a branch forks at, as it stood paused before `select`."""

    messages: list[BaseMessage]
    """The transcript the candidates answered."""
    pending: dict[str, Any]
    """The checkpointed turn (`turnbon_pending`): its candidates, id and state."""
    later: Sequence[str]
    """The segments the episode had still to play (follow-up user messages)."""


@dataclass
class _LiveRun:
    """The main episode, paused before every `select`, and its branches."""

    episode: ForkableEpisode
    engine: TurnEngine
    continuation: TurnEngine
    task: TaskSpec
    trial: int
    budget: RolloutBudget
    spend: Ledger
    concurrency: InitVar[int]
    """Rollouts at once (`limit`)."""
    branched: list[BranchTurn] = field(default_factory=list)
    skipped_turns: list[SkippedTurn] = field(default_factory=list)
    outcome: RolloutOutcome = "agent_error"
    error: str | None = None
    main_turns: int = 0

    def __post_init__(self, concurrency: int) -> None:
        self.limit = asyncio.Semaphore(concurrency)
        self.chosen = self.budget.chosen_turns(self.task, self.trial)

    async def drive(self) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from turnbon_graph.bench.episode import play
        from turnbon_graph.graph import agent_graph

        # Paused before every select: the candidates are checkpointed and the tools have
        # not yet run, so the working directory is as the turn saw it. The agent's time
        # limit does not count the rollouts (they run while it is paused).
        graph = agent_graph(
            self.engine, list(self.episode.tools), max_turns=self.task.max_turns
        ).compile(checkpointer=InMemorySaver(), interrupt_before=["select"])
        config: RunnableConfig = {"configurable": {"thread_id": "main"}}
        end = await play(graph, self.episode, self.task, config=config, on_pause=self._maybe_branch)
        self.outcome, self.error = _outcome(end), end.error
        final = await graph.aget_state(config)
        records = _records(final.values.get("messages", []))
        self.main_turns = len(records)
        for branch in self.branched:
            self._attach_pick(branch, records)
        unreached = sorted(t for t in self.chosen or () if t > len(records))
        self.skipped_turns += [
            SkippedTurn(turn=t, reason=f"the episode ended after {len(records)} turns")
            for t in unreached
        ]

    async def _maybe_branch(self, snapshot: Any, later: Sequence[str]) -> None:
        from turnbon_graph.turn.candidates import candidate_from_state, group_by_action

        messages: list[BaseMessage] = list(snapshot.values["messages"])
        number = len(_records(messages)) + 1
        if self.chosen is not None and number not in self.chosen:
            return
        pending: dict[str, Any] = snapshot.values["turnbon_pending"]
        candidates = [candidate_from_state(c) for c in pending["candidates"]]
        ok = [c for c in candidates if c.ok]
        groups = list(group_by_action(ok).values())
        if len(groups) <= 1 and self.budget.skip_unanimous:
            self.skipped_turns.append(SkippedTurn(turn=number, reason="unanimous"))
            return
        if (reason := await self.spend.check(self.budget)) is not None:
            self.skipped_turns.append(SkippedTurn(turn=number, reason=reason))
            return
        branch = BranchTurn(
            task=self.task.id,
            trial=self.trial,
            turn=number,
            turn_id=pending["turn_id"],
            checkpoint_id=snapshot.config.get("configurable", {}).get("checkpoint_id"),
            candidates=[_candidate_value(c) for c in candidates],
        )
        leaders = [ok[g[0]] for g in groups]
        leader_of = {ok[p].index: ok[g[0]].index for g in groups for p in g}
        for value in branch.candidates:
            if leader_of.get(value.index, value.index) != value.index:
                value.shares_with = leader_of[value.index]
        paused = _PausedTurn(messages, pending, later)
        by_index = {c["index"]: c for c in pending["candidates"]}
        jobs = [
            self._job(branch, paused, by_index[leader.index], repeat)
            for repeat in range(self.budget.rollouts)
            for leader in leaders
        ]
        await _all(jobs)
        branch.rollouts.sort(key=lambda r: (r.candidate, r.repeat))
        for value in branch.candidates:
            source = value.index if value.shares_with is None else value.shares_with
            done = [
                r for r in branch.rollouts if r.candidate == source and r.outcome != "fork_error"
            ]
            if value.ok and done:
                value.rollouts = len(done)
                value.value = sum(r.passed for r in done) / len(done)
        self.branched.append(branch)

    async def _job(
        self, branch: BranchTurn, paused: _PausedTurn, candidate: dict[str, Any], repeat: int
    ) -> None:
        async with self.limit:  # FIFO: the first repeat of every action starts first
            if (reason := await self.spend.start(self.budget)) is not None:
                branch.skipped.append(
                    SkippedRollout(candidate=candidate["index"], repeat=repeat, reason=reason)
                )
                return
            rollout = await self._rollout(paused, candidate, repeat)
            await self.spend.spent(rollout.tokens)
            branch.rollouts.append(rollout)

    async def _rollout(
        self, paused: _PausedTurn, candidate: dict[str, Any], repeat: int
    ) -> Rollout:
        from langgraph.checkpoint.memory import InMemorySaver

        from turnbon_graph.bench.episode import EpisodeEnd, classify_failure, play
        from turnbon_graph.graph import agent_graph

        started = time.monotonic()
        index = candidate["index"]
        try:
            fork = await self.episode.fork()
        except Exception as exc:
            return Rollout(
                candidate=index,
                repeat=repeat,
                outcome="fork_error",
                error=f"{type(exc).__name__}: {exc}"[:2000],
                duration_s=round(time.monotonic() - started, 3),
            )
        graph: Any = None
        config: RunnableConfig = {"configurable": {"thread_id": f"rollout-{index}-{repeat}"}}
        try:
            graph = agent_graph(
                self.continuation, list(fork.tools), max_turns=self.task.max_turns
            ).compile(checkpointer=InMemorySaver())
            # The turn's checkpoint with only this candidate left: the select node then
            # takes it without a selector call ("single") and the tools node executes it.
            forced = {**paused.pending, "candidates": [candidate], "rejected": 0, "committed": None}
            await graph.aupdate_state(
                config,
                {
                    "messages": [m.model_copy(deep=True) for m in paused.messages],
                    "turnbon_pending": forced,
                },
                as_node="generate",
            )
            end = await play(
                graph, fork, self.task, segments=paused.later, config=config, resume=True
            )
        except Exception as exc:  # the continuation could not be set up (a bug re-raises)
            end = EpisodeEnd(*classify_failure(exc, self.task))
        finally:
            await fork.close()
        after: list[TurnRecord] = []
        if graph is not None:
            state = await graph.aget_state(config)
            # The forced turn's record carries the candidate's own usage, paid by the
            # main episode: only the turns after it are the rollout's.
            after = _records(state.values.get("messages", []))[len(_records(paused.messages)) + 1 :]
        return Rollout(
            candidate=index,
            repeat=repeat,
            outcome=_outcome(end),
            turns=len(after),
            tokens=sum(r.usage.total.total_tokens for r in after),
            duration_s=round(time.monotonic() - started, 3),
            error=end.error,
        )

    def _attach_pick(self, branch: BranchTurn, records: list[TurnRecord]) -> None:
        """The main episode's choice at the branched turn, its scores, then the measures."""
        if branch.turn <= len(records):
            record = records[branch.turn - 1]
            branch.selector = record.selector
            notes = []
            if record.synthesized is not None:
                notes.append("the selector executed an action it wrote: realised is undefined")
            elif record.resamples:
                notes.append(
                    "the selector rejected every candidate and picked from a fresh batch: "
                    "realised is undefined"
                )
            else:
                branch.picked = record.selected_index
            if record.scores is not None and not record.resamples:
                by_index = dict(
                    zip((c.index for c in record.candidates), record.scores, strict=True)
                )
                for value in branch.candidates:
                    value.score = by_index.get(value.index)
            branch.note = "; ".join(notes) or None
        else:
            branch.note = "the main episode stopped before its selector chose"
        branch.measure()


def _candidate_value(candidate: Candidate) -> CandidateValue:
    from turnbon_graph.analysis.trajectories import dumps_action

    record = candidate.to_record()
    return CandidateValue(
        index=candidate.index,
        action=dumps_action(record.tool_calls, record.content)
        if candidate.ok
        else f"(failed: {candidate.error})",
        ok=candidate.ok,
    )


def _records(messages: Sequence[BaseMessage]) -> list[TurnRecord]:
    from turnbon_graph.turn.engine import turn_record

    return [r for m in messages if (r := turn_record(m)) is not None]


def _outcome(end: EpisodeEnd) -> RolloutOutcome:
    """How a verified episode ended (`play` verifies, so there is always an outcome)."""
    assert end.outcome is not None
    return end.outcome


async def _all(jobs: Sequence[Awaitable[None]]) -> None:
    """Runs `jobs` together; when one raises (a bug: rollouts record the agent's own
    failures), the others are cancelled, so their forks close, before it propagates."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

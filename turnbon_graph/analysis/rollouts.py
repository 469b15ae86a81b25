"""Exploration vs exploitation at the turn level, measured by branch rollouts.

At a sampled turn the N candidates sit in the graph's state (checkpointed between the
`generate` and `select` nodes) and the working directory is as the turn saw it. Each
candidate's value is estimated by forking the episode (a copy of its working
directory), restoring that checkpoint into a graph bound to the fork's tools, forcing
the candidate as the turn's action, continuing to the end with a fixed continuation
policy, and running the verifier: the mean pass over R such rollouts. The main episode
meanwhile goes on with its own selector's pick. From the values, as in the companion
study (shared/seeds/004_0cd7b162cf94b3f4.txt):

    oracle    the best candidate's value: is a good action in the pool (exploration)?
    realised  the value of the candidate the selector picked
    mu        the pool mean: what a uniformly random pick gets
    h         headroom capture (realised - mu) / (oracle - mu): 1 = the best pick,
              0 = no better than random, < 0 = worse (exploitation). Undefined (None)
              when oracle == mu: every candidate is worth the same, there is no headroom.
    rho_v     verifier correlation: Spearman (ties by average ranks) between a scoring
              selector's scores and the values; the study finds h ~ rho_v.

With few rollouts a value is a noisy estimate, and the best of N noisy estimates
overstates the oracle (the study's "naive oracle"): h is then conservative.

Per turn and aggregated (`summarise`). Candidates that propose the same action share
their rollouts (they are the same action), and failed candidates have no value (they
could not be picked). Budgets (`RolloutBudget`) cap the turns branched, the rollouts per
candidate and the rollouts and tokens overall; what a cap skipped is recorded.
`estimate_cost` and `format_plan` say what a run will cost before it starts.

Only episodes that can be forked take part: `ForkableEpisode` (the terminal
environment's episodes are). A fork copies files, not processes: a background server
the agent started is not running in the forks.

Recorded episodes (a run folder) are not replayed here: rebuilding a turn's working
directory by re-running the commands before it is not faithful in general (outputs
that name the episode's directory, time or randomness differ, and the turns file keeps
only the first 4000 characters of each observation to compare against), so values are
estimated on live episodes only.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from turnbon_graph.bench.environment import Environment, Episode, TaskSpec

if TYPE_CHECKING:  # analysis modules are read without paying for LangGraph
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

    from turnbon_graph.candidates import Candidate
    from turnbon_graph.records import TurnRecord
    from turnbon_graph.turn import TurnEngine

ROLLOUTS_FILE = "rollouts.jsonl"
"""One line per episode (a `RolloutReport`) in the run folder."""

RolloutOutcome = Literal[
    "pass", "wrong_submission", "out_of_context", "time_limit", "agent_error", "fork_error"
]
"""How a rollout (or the main episode) ended: the runner's outcomes, and `fork_error`
when the episode could not be copied (not counted in a value: not the action's fault)."""


@runtime_checkable
class ForkableEpisode(Episode, Protocol):
    """An episode that can be copied mid-way: what branch rollouts need."""

    async def fork(self) -> Episode:
        """A new episode of the same task and verifier whose state (working directory)
        is a copy of this one's; independent from then on, closed by the caller."""
        ...


# ---------------------------------------------------------------------------- budget


class RolloutBudget(BaseModel):
    """Which turns to branch at and what the rollouts may spend (the CLI's flags)."""

    turns: list[int] | None = None
    """1-based turn numbers to branch at; None: `sample_turns` of them, or every turn."""
    sample_turns: int | None = Field(default=None, ge=1)
    """How many turns to branch at, drawn (seeded, per episode) from 1..horizon."""
    horizon: int | None = Field(default=None, ge=1)
    """The range `sample_turns` draws from (default: the task's max_turns). Set it to the
    typical episode length, or most draws fall after the episode ended."""
    rollouts: int = Field(default=1, ge=1)
    """R: rollouts per candidate (per distinct action)."""
    max_rollouts: int | None = Field(default=None, ge=0)
    """No new rollout starts once this many have started (over the shared `Spend`)."""
    max_tokens: int | None = Field(default=None, ge=0)
    """No new rollout starts once the rollouts spent this many tokens (rollouts in
    flight finish, so the total can pass it by what they spend)."""
    seed: int = 0
    skip_unanimous: bool = True
    """Do not branch where every candidate proposes the same action: h and rho_v are
    undefined there, and the rollouts would only measure the state's value."""

    @model_validator(mode="after")
    def _check(self) -> RolloutBudget:
        if self.turns is not None and self.sample_turns is not None:
            raise ValueError("give turns (which turns) or sample_turns (how many), not both")
        if self.turns is not None and any(t < 1 for t in self.turns):
            raise ValueError(f"turn numbers start at 1, got {self.turns}")
        return self

    def chosen_turns(self, task: TaskSpec, trial: int) -> set[int] | None:
        """The turns to branch at in this episode; None means every turn."""
        if self.turns is not None:
            return set(self.turns)
        if self.sample_turns is None:
            return None
        horizon = self.horizon or task.max_turns
        # Seeded per episode, so episodes do not all branch at the same turns.
        rng = random.Random(f"{self.seed}|{task.id}|{trial}")
        return set(rng.sample(range(1, horizon + 1), min(self.sample_turns, horizon)))


@dataclass
class Spend:
    """Rollouts started and tokens they spent. Share one across episodes so the budget's
    caps hold for a whole run rather than each episode."""

    rollouts: int = 0
    tokens: int = 0

    def exhausted(self, budget: RolloutBudget) -> str | None:
        """Why no new rollout may start, or None."""
        if budget.max_rollouts is not None and self.rollouts >= budget.max_rollouts:
            return f"rollout budget spent ({self.rollouts} of {budget.max_rollouts})"
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"token budget spent ({self.tokens} of {budget.max_tokens})"
        return None


# ---------------------------------------------------------------------------- results


class Rollout(BaseModel):
    """One continuation from a forced candidate to the verifier."""

    candidate: int
    """The candidate forced (the first of those proposing the same action)."""
    repeat: int
    outcome: RolloutOutcome
    turns: int = 0
    """Turns taken after the forced one."""
    tokens: int = 0
    """Tokens of the continuation's calls (the forced candidate's own are not counted)."""
    duration_s: float = 0.0
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


class SkippedRollout(BaseModel):
    candidate: int
    repeat: int
    reason: str


class CandidateValue(BaseModel):
    """One candidate of a branched turn: its action, estimated value and score."""

    index: int
    action: str
    value: float | None = None
    """Mean verifier pass over its rollouts; None: failed candidate or no rollout ran."""
    rollouts: int = 0
    """Rollouts that count toward the value (fork errors and skips do not)."""
    shares_with: int | None = None
    """The candidate whose rollouts it shares (same action), or None."""
    score: float | None = None
    ok: bool = True


class BranchTurn(BaseModel):
    """One branched turn: every candidate's value, the pick, and the measures."""

    task: str
    trial: int
    turn: int
    """1-based position of the turn in its episode."""
    turn_id: str
    checkpoint_id: str | None = None
    """The main graph's checkpoint the rollouts were restored from."""
    candidates: list[CandidateValue]
    picked: int | None = None
    """The index the main episode's selector picked; None if the episode stopped first."""
    selector: str | None = None
    oracle: float | None = None
    realised: float | None = None
    mu: float | None = None
    h: float | None = None
    rho_v: float | None = None
    complete: bool = False
    """Every successful candidate has a value (no budget skip): only complete turns
    enter the aggregates, since oracle and mu over part of the pool are biased."""
    note: str | None = None
    rollouts: list[Rollout] = Field(default_factory=list)
    skipped: list[SkippedRollout] = Field(default_factory=list)

    @property
    def values(self) -> list[float | None]:
        return [c.value for c in self.candidates]

    @property
    def scores(self) -> list[float | None]:
        return [c.score for c in self.candidates]

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per candidate, for a DataFrame."""
        return [
            {
                "task": self.task,
                "trial": self.trial,
                "turn": self.turn,
                "candidate": c.index,
                "action": c.action,
                "value": c.value,
                "rollouts": c.rollouts,
                "score": c.score,
                "picked": c.index == self.picked,
                "best": c.value is not None and c.value == self.oracle,
            }
            for c in self.candidates
        ]

    def measure(self) -> None:
        """Fills oracle, realised, mu, h, rho_v and complete from values, pick and scores."""
        pool = [c for c in self.candidates if c.ok]
        valued = [c.value for c in pool if c.value is not None]
        self.complete = bool(pool) and len(valued) == len(pool)
        if not valued:
            return
        self.oracle = max(valued)
        self.mu = sum(valued) / len(valued)
        chosen = next((c for c in pool if c.index == self.picked), None)
        self.realised = chosen.value if chosen is not None else None
        self.h = headroom(self.realised, self.oracle, self.mu)
        pairs = [(c.score, c.value) for c in pool if c.score is not None and c.value is not None]
        self.rho_v = spearman([s for s, _ in pairs], [v for _, v in pairs])


class SkippedTurn(BaseModel):
    turn: int
    reason: str


class RolloutSummary(BaseModel):
    """Aggregates over branched turns (complete ones; see `BranchTurn.complete`)."""

    turns: int
    complete_turns: int
    h_turns: int
    """Complete turns where h is defined (oracle > mu and a picked value)."""
    mean_h: float | None = None
    mean_oracle: float | None = None
    mean_realised: float | None = None
    mean_mu: float | None = None
    rho_v: float | None = None
    """Spearman over every (score, value) pair of the complete turns, pooled."""
    rho_v_mean: float | None = None
    """Mean of the per-turn rho_v where defined (the study's per-task convention)."""
    rho_v_turns: int = 0
    rollouts: int = 0
    skipped_rollouts: int = 0
    tokens: int = 0


class RolloutReport(BaseModel):
    """One episode's branch rollouts: the main episode's outcome and the branched turns."""

    environment: str
    task: str
    trial: int
    selector: str
    n: int
    continuation: str
    budget: RolloutBudget
    outcome: RolloutOutcome
    """How the main episode (its own selector's picks) ended."""
    error: str | None = None
    main_turns: int = 0
    turns: list[BranchTurn] = Field(default_factory=list)
    skipped_turns: list[SkippedTurn] = Field(default_factory=list)
    tokens: int = 0
    """Tokens the rollouts of this episode spent."""
    duration_s: float = 0.0

    @property
    def summary(self) -> RolloutSummary:
        return summarise(self.turns)

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per branched turn, for a DataFrame."""
        return [
            {
                "environment": self.environment,
                "task": self.task,
                "trial": self.trial,
                "selector": self.selector,
                "n": self.n,
                "episode_passed": self.outcome == "pass",
                "turn": t.turn,
                "picked": t.picked,
                "oracle": t.oracle,
                "realised": t.realised,
                "mu": t.mu,
                "h": t.h,
                "rho_v": t.rho_v,
                "complete": t.complete,
                "rollouts": len(t.rollouts),
                "skipped_rollouts": len(t.skipped),
            }
            for t in self.turns
        ]

    def candidate_rows(self) -> list[dict[str, Any]]:
        """One row per candidate of every branched turn, for a DataFrame."""
        return [
            {"selector": self.selector, "n": self.n, **row}
            for t in self.turns
            for row in t.to_rows()
        ]


# ---------------------------------------------------------------------------- measures


def headroom(realised: float | None, oracle: float | None, mu: float | None) -> float | None:
    """(realised - mu) / (oracle - mu); None when undefined (oracle == mu, or a missing
    value): with no headroom there is nothing to capture."""
    if realised is None or oracle is None or mu is None or oracle == mu:
        return None
    return (realised - mu) / (oracle - mu)


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson over average ranks, so ties are handled);
    None with fewer than two pairs or when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs pairs: {len(x)} x values, {len(y)} y values")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return float(cov / (vx * vy) ** 0.5)


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarise(turns: Iterable[BranchTurn]) -> RolloutSummary:
    """The aggregates over branched turns (of one episode or many)."""
    turns = list(turns)
    complete = [t for t in turns if t.complete]
    per_turn_rho = [t.rho_v for t in complete if t.rho_v is not None]
    pairs = [
        (c.score, c.value)
        for t in complete
        for c in t.candidates
        if c.ok and c.score is not None and c.value is not None
    ]
    return RolloutSummary(
        turns=len(turns),
        complete_turns=len(complete),
        h_turns=sum(t.h is not None for t in complete),
        mean_h=_mean(t.h for t in complete),
        mean_oracle=_mean(t.oracle for t in complete),
        mean_realised=_mean(t.realised for t in complete),
        mean_mu=_mean(t.mu for t in complete),
        rho_v=spearman([s for s, _ in pairs], [v for _, v in pairs]),
        rho_v_mean=_mean(per_turn_rho),
        rho_v_turns=len(per_turn_rho),
        rollouts=sum(len(t.rollouts) for t in turns),
        skipped_rollouts=sum(len(t.skipped) for t in turns),
        tokens=sum(r.tokens for t in turns for r in t.rollouts),
    )


# ---------------------------------------------------------------------------- storage


def write_report(run: str | Path, report: RolloutReport) -> Path:
    """Appends the report to RUN/rollouts.jsonl; returns the file's path."""
    from turnbon_graph.bench.runs import append_line

    path = Path(run) / ROLLOUTS_FILE
    append_line(path, report.model_dump_json())
    return path


def read_reports(run: str | Path) -> list[RolloutReport]:
    """Every report in RUN/rollouts.jsonl (a torn last line, from a kill, is skipped)."""
    from turnbon_graph.bench.runs import read_lines

    return read_lines(Path(run) / ROLLOUTS_FILE, RolloutReport)


# ---------------------------------------------------------------------------- cost


class UsageProfile(BaseModel):
    """What a turn costs and how long episodes run: the basis of a cost estimate."""

    episode_turns: float = Field(gt=0)
    """Turns in a typical episode."""
    tokens_per_turn: float = Field(ge=0)
    """Tokens of one continuation turn (one generator call with n=1)."""
    usd_per_token: float | None = None

    @classmethod
    def from_records(cls, records: Sequence[TurnRecord], episodes: int = 1) -> UsageProfile:
        """From the turn records of `episodes` episodes (a recorded run, or the episode
        so far): tokens per generator call, turns per episode."""
        if not records or episodes < 1:
            raise ValueError("need at least one turn record of at least one episode")
        calls = sum(r.usage.generator.calls for r in records)
        tokens = sum(r.usage.generator.total_tokens for r in records)
        priced = [r.usage.generator for r in records if r.usage.generator.cost_usd is not None]
        priced_tokens = sum(u.total_tokens for u in priced)
        return cls(
            episode_turns=len(records) / episodes,
            tokens_per_turn=tokens / calls if calls else 0.0,
            usd_per_token=sum(u.cost_usd or 0.0 for u in priced) / priced_tokens
            if priced_tokens
            else None,
        )

    @classmethod
    def from_run(cls, run: str | Path, settings: Iterable[str] | None = None) -> UsageProfile:
        """From a run folder's recorded episodes (optionally only some settings)."""
        from turnbon_graph.analysis.trajectories import load_trajectories

        trajectories = [t for t in load_trajectories(run, settings) if t.turns]
        records = [turn.record for t in trajectories for turn in t.turns]
        return cls.from_records(records, max(len(trajectories), 1))


class CostEstimate(BaseModel):
    """What a branch-rollout run will start, at most, and what it will spend."""

    episodes: int
    turns_per_episode: float
    """Branched turns per episode (expected)."""
    candidates: int
    rollouts_per_candidate: int
    rollouts: int
    continuation_turns: float
    """Turns a rollout runs after the forced one (mean)."""
    tokens_per_turn: float
    tokens: int
    usd: float | None = None
    limited_by: list[str] = Field(default_factory=list)


def estimate_cost(
    budget: RolloutBudget,
    *,
    n: int,
    profile: UsageProfile,
    episodes: int = 1,
    max_turns: int | None = None,
) -> CostEstimate:
    """An upper estimate: every sampled turn branched, every candidate a distinct action.
    A rollout from turn t of a T-turn episode runs about T - t more turns (at least 1).
    `max_turns`: the tasks' limit, the default range of `sample_turns`."""
    length = max(round(profile.episode_turns), 1)
    if budget.turns is not None:
        sampled = [t for t in budget.turns if t <= length]
        per_episode = float(len(sampled))
    elif budget.sample_turns is not None:
        horizon = budget.horizon or max_turns or length
        reach = min(horizon, length)
        sampled = list(range(1, reach + 1))
        per_episode = min(budget.sample_turns, horizon) * reach / horizon
    else:
        sampled = list(range(1, length + 1))
        per_episode = float(length)
    continuation = sum(max(length - t, 1) for t in sampled) / len(sampled) if sampled else 0.0
    rollouts = round(episodes * per_episode * n * budget.rollouts)
    limited: list[str] = []
    if budget.max_rollouts is not None and rollouts > budget.max_rollouts:
        rollouts = budget.max_rollouts
        limited.append(f"max_rollouts={budget.max_rollouts}")
    tokens = round(rollouts * continuation * profile.tokens_per_turn)
    if budget.max_tokens is not None and tokens > budget.max_tokens:
        tokens = budget.max_tokens
        limited.append(f"max_tokens={budget.max_tokens}")
    return CostEstimate(
        episodes=episodes,
        turns_per_episode=per_episode,
        candidates=n,
        rollouts_per_candidate=budget.rollouts,
        rollouts=rollouts,
        continuation_turns=continuation,
        tokens_per_turn=profile.tokens_per_turn,
        tokens=tokens,
        usd=tokens * profile.usd_per_token if profile.usd_per_token is not None else None,
        limited_by=limited,
    )


def format_plan(estimate: CostEstimate) -> str:
    """The estimate as the lines a CLI prints before starting."""
    e = estimate
    lines = [
        f"Branch rollouts: {e.episodes} episode(s) x {e.turns_per_episode:g} turn(s) x "
        f"{e.candidates} candidates x {e.rollouts_per_candidate} rollout(s) "
        f"-> at most {e.rollouts} rollouts",
        f"Each rollout runs ~{e.continuation_turns:.1f} turn(s) at ~{e.tokens_per_turn:,.0f} "
        f"tokens a turn: ~{e.tokens:,} tokens" + (f" (~${e.usd:.2f})" if e.usd is not None else ""),
    ]
    if e.limited_by:
        lines.append(
            f"Capped by {', '.join(e.limited_by)}: no new rollout starts once it is spent "
            "(rollouts in flight finish)."
        )
    lines.append(
        "Candidates with the same action share rollouts and unanimous turns are skipped, "
        "so the run usually costs less; each rollout also runs the verifier once."
    )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- live run


def continuation_engine(engine: TurnEngine) -> TurnEngine:
    """The default continuation policy: the episode's generator, one candidate a turn,
    no selector call (what the plain agent would do from there)."""
    from turnbon_graph.selectors.simple import FirstSelector
    from turnbon_graph.turn import TurnEngine

    return TurnEngine(
        generator=engine.generator, selector=FirstSelector(), n=1, prompt=engine.prompt
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
    spend: Spend | None = None,
) -> RolloutReport:
    """Runs one live episode of `task` with `engine` and branches at the budget's turns.

    At a branched turn the episode pauses after `generate`; for each distinct action
    among the candidates, R forks of the episode each restore the turn's checkpoint,
    execute that action, continue with `continuation` (default: `continuation_engine`)
    to the end, including any follow-up user messages, and are verified and closed.
    Up to `concurrency` rollouts run at once. The main episode then continues with its
    own selector, so its pick (and scores) are measured against the values.
    """
    from turnbon_graph.errors import ConfigurationError

    budget = budget or RolloutBudget()
    continuation = continuation or continuation_engine(engine)
    spend = spend or Spend()
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
        n=engine.n,
        continuation=(
            f"{continuation.generator.label}, n={continuation.n}, "
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
    )


class _LiveRun:
    """The main episode, paused before every `select`, and its branches."""

    def __init__(
        self,
        episode: ForkableEpisode,
        engine: TurnEngine,
        continuation: TurnEngine,
        task: TaskSpec,
        trial: int,
        budget: RolloutBudget,
        spend: Spend,
        concurrency: int,
    ) -> None:
        self.episode = episode
        self.engine = engine
        self.continuation = continuation
        self.task = task
        self.trial = trial
        self.budget = budget
        self.spend = spend
        self.limit = asyncio.Semaphore(concurrency)
        self.chosen = budget.chosen_turns(task, trial)
        self.branched: list[BranchTurn] = []
        self.skipped_turns: list[SkippedTurn] = []
        self.outcome: RolloutOutcome = "agent_error"
        self.error: str | None = None
        self.main_turns = 0

    async def drive(self) -> None:
        from langchain_core.messages import HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver

        from turnbon_graph.graph import agent_graph

        # Paused before every select: the candidates are checkpointed and the tools have
        # not yet run, so the working directory is as the turn saw it.
        graph = agent_graph(
            self.engine, list(self.episode.tools), max_turns=self.task.max_turns
        ).compile(checkpointer=InMemorySaver(), interrupt_before=["select"])
        config: RunnableConfig = {"configurable": {"thread_id": "main"}}
        segments = [self.task.instruction, *self.task.follow_ups]
        spent = 0.0  # the agent's time limit does not count the rollouts
        try:
            for position, text in enumerate(segments):
                payload: dict[str, Any] | None = {"messages": [HumanMessage(text)]}
                while True:
                    begun = time.monotonic()
                    async with asyncio.timeout(max(self.task.agent_timeout_s - spent, 0.0)):
                        async for _ in graph.astream(payload, config):
                            pass
                    spent += time.monotonic() - begun
                    payload = None
                    snapshot = await graph.aget_state(config)
                    if "select" not in snapshot.next:
                        break
                    await self._maybe_branch(snapshot, segments[position + 1 :])
            self.outcome, self.error = await _verified(self.episode, self.task)
        except TimeoutError:
            self.outcome = "time_limit"
            self.error = f"no result within {self.task.agent_timeout_s:g} s"
        except Exception as exc:
            self.outcome, self.error = _failure(exc)
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
        from turnbon_graph.candidates import candidate_from_state, group_by_action

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
        if (reason := self.spend.exhausted(self.budget)) is not None:
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
        by_index = {c["index"]: c for c in pending["candidates"]}
        jobs = [
            self._job(branch, messages, pending, by_index[leader.index], repeat, later)
            for repeat in range(self.budget.rollouts)
            for leader in leaders
        ]
        await asyncio.gather(*jobs)
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
        self,
        branch: BranchTurn,
        messages: list[BaseMessage],
        pending: dict[str, Any],
        candidate: dict[str, Any],
        repeat: int,
        later: Sequence[str],
    ) -> None:
        async with self.limit:  # FIFO: the first repeat of every action starts first
            if (reason := self.spend.exhausted(self.budget)) is not None:
                branch.skipped.append(
                    SkippedRollout(candidate=candidate["index"], repeat=repeat, reason=reason)
                )
                return
            self.spend.rollouts += 1
            rollout = await self._rollout(messages, pending, candidate, repeat, later)
            self.spend.tokens += rollout.tokens
            branch.rollouts.append(rollout)

    async def _rollout(
        self,
        messages: list[BaseMessage],
        pending: dict[str, Any],
        candidate: dict[str, Any],
        repeat: int,
        later: Sequence[str],
    ) -> Rollout:
        from langchain_core.messages import HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver

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
        outcome: RolloutOutcome
        error: str | None = None
        try:
            graph = agent_graph(
                self.continuation, list(fork.tools), max_turns=self.task.max_turns
            ).compile(checkpointer=InMemorySaver())
            # The turn's checkpoint with only this candidate left: the select node then
            # takes it without a selector call ("single") and the tools node executes it.
            forced = {**pending, "candidates": [candidate], "rejected": 0, "committed": None}
            await graph.aupdate_state(
                config,
                {
                    "messages": [m.model_copy(deep=True) for m in messages],
                    "turnbon_pending": forced,
                },
                as_node="generate",
            )
            async with asyncio.timeout(self.task.agent_timeout_s):
                async for _ in graph.astream(None, config):
                    pass
                for text in later:
                    async for _ in graph.astream({"messages": [HumanMessage(text)]}, config):
                        pass
            outcome, error = await _verified(fork, self.task)
        except TimeoutError:
            outcome, error = "time_limit", f"no result within {self.task.agent_timeout_s:g} s"
        except Exception as exc:
            outcome, error = _failure(exc)
        finally:
            await fork.close()
        after: list[TurnRecord] = []
        if graph is not None:
            state = await graph.aget_state(config)
            # The forced turn's record carries the candidate's own usage, paid by the
            # main episode: only the turns after it are the rollout's.
            after = _records(state.values.get("messages", []))[len(_records(messages)) + 1 :]
        return Rollout(
            candidate=index,
            repeat=repeat,
            outcome=outcome,
            turns=len(after),
            tokens=sum(
                r.usage.generator.total_tokens + r.usage.selector.total_tokens for r in after
            ),
            duration_s=round(time.monotonic() - started, 3),
            error=error,
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
    from turnbon_graph.turn import turn_record

    return [r for m in messages if (r := turn_record(m)) is not None]


async def _verified(episode: Episode, task: TaskSpec) -> tuple[RolloutOutcome, str | None]:
    """The verifier's verdict as an outcome, as the runner reads it."""
    verdict = await asyncio.wait_for(episode.verify(), task.verifier_timeout_s)
    if verdict.error:
        return "agent_error", f"verifier: {verdict.error}"
    return ("pass" if verdict.passed else "wrong_submission"), None


def _failure(exc: BaseException) -> tuple[RolloutOutcome, str]:
    """As the runner classifies it: context overflow, else an agent error."""
    text = f"{type(exc).__name__} {exc}"
    lowered = text.lower()
    overflow = ("contextwindowexceeded", "context length", "context window")
    outcome: RolloutOutcome = (
        "out_of_context" if any(k in lowered for k in overflow) else "agent_error"
    )
    return outcome, f"{type(exc).__name__}: {exc}"[:2000]

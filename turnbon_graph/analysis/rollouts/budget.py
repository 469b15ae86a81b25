"""The budget plan of branch rollouts: which turns to branch at and what the rollouts may
spend (`RolloutBudget`, `Spend`), and what a run will cost before it starts
(`UsageProfile`, `estimate_cost`, `format_plan`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field, model_validator

from turnbon_graph.bench.environment import TaskSpec

if TYPE_CHECKING:
    from turnbon_graph.records import TurnRecord


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
    """Seeds which turns `sample_turns` draws (with the task and trial)."""
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
        """The turns to branch at in this episode.

        Args:
            task: the episode's task (its `max_turns` is the default horizon).
            trial: the episode's trial (the draw is seeded per episode).

        Returns:
            1-based turn numbers; None means every turn.
        """
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
    """Rollouts started."""
    tokens: int = 0
    """Tokens the finished rollouts spent."""

    def exhausted(self, budget: RolloutBudget) -> str | None:
        """Why no new rollout may start, or None.

        Args:
            budget: the caps (`max_rollouts`, `max_tokens`).

        Returns:
            Which cap is spent, or None.
        """
        if budget.max_rollouts is not None and self.rollouts >= budget.max_rollouts:
            return f"rollout budget spent ({self.rollouts} of {budget.max_rollouts})"
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"token budget spent ({self.tokens} of {budget.max_tokens})"
        return None

    # The `Ledger` side, which the live driver calls: a `Spend` is its own ledger in one
    # process, and a Ray actor behind a `LedgerOnRay` for workers that share one.

    async def check(self, budget: RolloutBudget) -> str | None:
        """`exhausted`, as the `Ledger` side.

        Args:
            budget: the caps.

        Returns:
            Which cap is spent, or None.
        """
        return self.exhausted(budget)

    async def start(self, budget: RolloutBudget) -> str | None:
        """Counts one more rollout started, or says why none may start.

        Args:
            budget: the caps.

        Returns:
            None when the rollout was counted, else which cap is spent.
        """
        reason = self.exhausted(budget)
        if reason is None:
            self.rollouts += 1
        return reason

    async def spent(self, tokens: int) -> None:
        """Adds tokens a finished rollout spent.

        Args:
            tokens: its tokens.
        """
        self.tokens += tokens


class Ledger(Protocol):
    """Where rollouts count what they spend against a budget: a `Spend`, or one shared by
    processes (`LedgerOnRay`), so that the caps hold for a whole run."""

    async def check(self, budget: RolloutBudget) -> str | None:
        """Why no new rollout may start, or None."""
        ...

    async def start(self, budget: RolloutBudget) -> str | None:
        """Counts one more rollout started (checked and counted at once), or says why none
        may start."""
        ...

    async def spent(self, tokens: int) -> None:
        """Adds tokens a finished rollout spent."""
        ...


@dataclass(frozen=True)
class LedgerOnRay:
    """A `Spend` held by a Ray actor (`ray.remote(Spend)`), shared by the workers of a
    run; pickles as the actor's handle. Each call is one round trip to the actor."""

    actor: Any

    async def check(self, budget: RolloutBudget) -> str | None:
        reason: str | None = await self.actor.check.remote(budget)
        return reason

    async def start(self, budget: RolloutBudget) -> str | None:
        reason: str | None = await self.actor.start.remote(budget)
        return reason

    async def spent(self, tokens: int) -> None:
        await self.actor.spent.remote(tokens)


class UsageProfile(BaseModel):
    """What a turn costs and how long episodes run: the basis of a cost estimate."""

    episode_turns: float = Field(gt=0)
    """Turns in a typical episode."""
    tokens_per_turn: float = Field(ge=0)
    """Tokens of one continuation turn (one generator call with n=1)."""
    usd_per_token: float | None = None
    """US dollars per token, where LiteLLM priced the calls; None otherwise."""

    @classmethod
    def from_records(cls, records: Sequence[TurnRecord], episodes: int = 1) -> UsageProfile:
        """From the turn records of `episodes` episodes (a recorded run, or the episode
        so far): tokens per generator call, turns per episode.

        Args:
            records: the turn records.
            episodes: how many episodes they come from.

        Returns:
            The profile.

        Raises:
            ValueError: no record, or `episodes` below 1.
        """
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
        """From a run folder's recorded episodes (optionally only some settings).

        Args:
            run: the run folder whose turns are measured (`load_trajectories`).
            settings: measure only these settings' episodes; None: every setting's.

        Returns:
            The profile: per turn and per call, what the run's calls spent.

        Raises:
            FileNotFoundError: there is no folder at `run`.
            ValueError: the folder holds no recorded turn.
        """
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

    Args:
        budget: the turns to branch at, rollouts per candidate and the caps.
        n: candidates per turn.
        profile: what a turn costs and how long episodes run.
        episodes: episodes the run branches.
        max_turns: the tasks' limit, the default range of `sample_turns`.

    Returns:
        The rollouts and tokens at most, and which caps bound them.
    """
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
    """The estimate as the lines a CLI prints before starting.

    Args:
        estimate: what `estimate_cost` returned.

    Returns:
        The lines, joined.
    """
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

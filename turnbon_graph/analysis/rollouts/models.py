"""The records of branch rollouts (one `RolloutReport` per episode, its `BranchTurn`s,
their candidates' values and rollouts), their JSON-lines file in the run folder, and
`summarise`, their aggregates (`RolloutSummary`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from turnbon_graph.analysis.rollouts.budget import RolloutBudget
from turnbon_graph.analysis.rollouts.statistics import headroom, spearman
from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import Worker

ROLLOUTS_FILE = "rollouts.jsonl"
"""One line per episode (a `RolloutReport`) in the run folder."""

RolloutOutcome = Literal[Outcome, "fork_error"]
"""How a rollout (or the main episode) ended: the runner's outcomes, and `fork_error`
when the episode could not be copied (not counted in a value: not the action's fault)."""


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
    """A rollout of a candidate that did not run, and why (the budget was spent, ...)."""

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
    """A turn chosen for branching that was not branched, and why."""

    turn: int
    reason: str


class RolloutReport(BaseModel):
    """One episode's branch rollouts: the main episode's outcome and the branched turns."""

    environment: str
    """The environment's name."""
    task: str
    """The task's id."""
    trial: int
    """The trial."""
    selector: str
    """The main episode's selector."""
    n: int
    """Candidates per turn of the main episode."""
    continuation: str
    """The continuation policy: its model(s), n and selector."""
    budget: RolloutBudget
    """The turns branched at and the caps."""
    outcome: RolloutOutcome
    """How the main episode (its own selector's picks) ended."""
    error: str | None = None
    """Why the main episode failed, if it did."""
    main_turns: int = 0
    """Turns the main episode ran."""
    turns: list[BranchTurn] = Field(default_factory=list)
    """The branched turns, with their candidates' rollouts."""
    skipped_turns: list[SkippedTurn] = Field(default_factory=list)
    """Turns chosen for branching but not branched, and why."""
    tokens: int = 0
    """Tokens the rollouts of this episode spent."""
    duration_s: float = 0.0
    """Seconds the episode and its rollouts took."""
    worker: Worker | None = None
    """The process that ran the episode and its rollouts (a Ray worker's with `--ray`;
    None in reports written before the field)."""

    @property
    def summary(self) -> RolloutSummary:
        """The aggregates over its branched turns."""
        return summarise(self.turns)

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per branched turn, for a DataFrame.

        Returns:
            The rows: the episode's keys, the turn's oracle, realised, mu, h and rho_v.
        """
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
        """One row per candidate of every branched turn, for a DataFrame.

        Returns:
            The rows: selector and n, then each candidate's fields.
        """
        return [
            {"selector": self.selector, "n": self.n, **row}
            for t in self.turns
            for row in t.to_rows()
        ]


# ---------------------------------------------------------------------------- storage


def write_report(run: str | Path, report: RolloutReport) -> Path:
    """Appends the report to RUN/rollouts.jsonl.

    Args:
        run: the run folder.
        report: one episode's report.

    Returns:
        The file's path.
    """
    from turnbon_graph.bench.running.runs import append_line

    path = Path(run) / ROLLOUTS_FILE
    append_line(path, report.model_dump_json())
    return path


def read_reports(run: str | Path) -> list[RolloutReport]:
    """Every report in RUN/rollouts.jsonl (a torn last line, from a kill, is skipped).

    Args:
        run: the run folder.

    Returns:
        The reports, in the order they were written.
    """
    from turnbon_graph.bench.running.runs import read_lines

    return read_lines(Path(run) / ROLLOUTS_FILE, RolloutReport)


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


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarise(turns: Iterable[BranchTurn]) -> RolloutSummary:
    """The aggregates over branched turns (of one episode or many).

    Args:
        turns: branched turns.

    Returns:
        Their counts and means (h, rho_v), over the complete ones.
    """
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

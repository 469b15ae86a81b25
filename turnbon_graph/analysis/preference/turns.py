"""The turns both analyses count, and their pools of candidates.

Which turns count (both analyses use the same rule, `turn_status`):

* Only candidates that produced an action ("ok" ones) are in the pool: a failed call
  cannot be picked, so random selection is among the ok candidates.
* Turns with one ok candidate, or whose candidates all agree on a behaviour (a unanimous
  pool), are kept. They carry no preference information - their picked indicator equals
  their chance share, so they add exactly 0 to the gap - but the paper's percentages are
  of *turns* ("the percentage of turns where the selector's pick shows a particular
  behaviour" vs "the expected percentage of turns with a behaviour under random
  selection from N candidates", Figure 4 caption), so dropping them would change both
  plotted shares. `informative_turns` counts the turns whose pool disagrees on the
  behaviour, for readers who want the gap per informative turn.
* Turns whose action a selector synthesized (`TurnRecord.synthesized`) are left out:
  the executed action is none of the candidates, so "random choice among the
  candidates" is not its counterfactual. They are counted in `synthesized_turns`. The
  synthesized command still enters the history that later turns are tagged with, since
  it is what ran.
* Turns whose pick a rule made although the candidates differed - a fallback after the
  selector failed or rejected everything (`TurnRecord.fallback`), or an early commit on
  agreement (selector "agreement") - are left out: the pick is not the selector model's
  preference. They are counted in `rule_turns`. (Any recorded fallback counts, so this
  also drops a refining selector's turns where the refinement failed and the inner
  selector's pick was kept.)
* Turns the selector rejected whole and sampled afresh (`TurnRecord.resamples`) are left
  out: the record keeps both batches but the pick was made among the fresh one only, so
  the pool that chance should draw from is not recorded. They are counted in
  `resampled_turns`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from turnbon_graph.analysis.trajectories import Trajectory, TurnView
from turnbon_graph.records import CandidateRecord

__all__ = ["AGREEMENT_SELECTOR", "History", "SettingRow", "TurnStatus", "turn_status"]

History = Sequence[tuple[str, int | None]]
"""(command, exit code) of the commands an episode executed before a turn."""

AGREEMENT_SELECTOR = "agreement"
"""`TurnRecord.selector` when early commit picked the agreed action without a selector."""

TurnStatus = Literal["counted", "synthesized", "rule", "resampled", "unusable"]


def turn_status(turn: TurnView) -> TurnStatus:
    """Whether a turn enters the analyses, or why not (see the module docstring)."""
    record = turn.record
    if record.synthesized is not None:
        return "synthesized"
    if not turn.candidates or turn.chosen.error is not None:
        return "unusable"  # no pool, or a failed pick: the engine records neither
    if record.fallback is not None or record.selector == AGREEMENT_SELECTOR:
        return "rule"
    if record.resamples:
        return "resampled"
    return "counted"


@dataclass(frozen=True)
class _Pool:
    """One counted turn: its ok candidates and the position of the pick among them."""

    task: str
    candidates: list[CandidateRecord]
    picked: int


class SettingRow(BaseModel):
    """What a row of either analysis starts with: its setting, and the setting's turns
    left out of the comparison, by why (see the module docstring)."""

    setting: str
    """The setting."""
    n: int
    """Its N (candidates per turn)."""
    synthesized_turns: int
    """Turns left out because a selector wrote the executed action."""
    rule_turns: int
    """Turns left out because a fallback or early commit, not the selector, picked."""
    resampled_turns: int
    """Turns left out because the selector rejected the first batch and a fresh one ran."""

    def to_row(self) -> dict[str, Any]:
        """A flat dict, for a table or a CSV row.

        Returns:
            Every field by name, the turns left out last.
        """
        row = self.model_dump()
        left_out = {name: row.pop(name) for name in LeftOut.__annotations__}
        return row | left_out


class LeftOut(TypedDict):
    """A setting's turns left out of the comparison, by why, as its rows name them."""

    synthesized_turns: int
    rule_turns: int
    resampled_turns: int


@dataclass
class _Setting:
    n: int
    pools: list[_Pool]
    tagged: list[list[frozenset[str]]]
    """Per pool, the tags of each of its candidates (filled only when tagging)."""
    synthesized_turns: int = 0
    rule_turns: int = 0
    resampled_turns: int = 0

    def left_out(self) -> LeftOut:
        """The turns left out, for a row of this setting."""
        return LeftOut(
            synthesized_turns=self.synthesized_turns,
            rule_turns=self.rule_turns,
            resampled_turns=self.resampled_turns,
        )


def _pool(task: str, turn: TurnView) -> _Pool:
    # The pick's position among the ok candidates: the ok ones recorded before it.
    index = turn.record.selected_index
    before = sum(c.error is None for c in turn.record.candidates[:index])
    return _Pool(task, turn.candidates, before)


def setting_order(
    trajectories: Iterable[Trajectory],
    tag: Callable[[CandidateRecord, History], frozenset[str]] | None,
    *,
    multi_only: bool = True,
) -> dict[str, _Setting]:
    """Counted pools of every setting (N>1 only, unless asked), ordered by N then name;
    with `tag`, each pool's candidates tagged given the episode's earlier commands."""
    found: dict[str, _Setting] = {}
    for trajectory in trajectories:
        if multi_only and trajectory.result.n <= 1:
            continue
        setting = found.setdefault(trajectory.setting, _Setting(trajectory.result.n, [], []))
        # Trajectory.history(turn) built up turn by turn: it rescans the episode per call.
        executed: list[tuple[str, int | None]] = []
        for turn in trajectory.turns:
            history = tuple(executed)
            if (command := turn.chosen_command) is not None:
                executed.append((command, turn.exit_code))
            status = turn_status(turn)
            if status == "synthesized":
                setting.synthesized_turns += 1
            elif status == "rule":
                setting.rule_turns += 1
            elif status == "resampled":
                setting.resampled_turns += 1
            elif status == "counted":
                pool = _pool(trajectory.task, turn)
                setting.pools.append(pool)
                if tag is not None:
                    setting.tagged.append([tag(c, history) for c in pool.candidates])
    return dict(sorted(found.items(), key=lambda item: (item[1].n, item[0])))


def no_multi(trajectories: Sequence[Trajectory]) -> ValueError:
    seen = sorted({t.setting for t in trajectories})
    return ValueError(
        "no setting with N>1 in these trajectories (settings: "
        f"{', '.join(seen) or 'none'}): there is no choice among candidates to analyse"
    )


def task_means(values: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Mean value per task (turns pooled across trials), tasks in sorted order."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for task, value in values:
        grouped[task].append(value)
    return {task: sum(v) / len(v) for task, v in sorted(grouped.items())}

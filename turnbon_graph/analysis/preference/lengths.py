"""How long the actions the selector picks are (the paper's Figure 5).

Figure 5. Per turn, reasoning tokens and command characters of the picked candidate, the
mean of the turn's unpicked candidates, and the baseline setting's (N=1) executed action;
bootstrapped over tasks for picked minus unpicked (paired within the turn) and picked
minus baseline (paired by task).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from turnbon_graph.analysis.preference.turns import (
    SettingRow,
    no_multi,
    setting_order,
    task_means,
)
from turnbon_graph.analysis.trajectories import Trajectory, command_of
from turnbon_graph.bench.stats.metrics import BootstrapResult, bootstrap_differences
from turnbon_graph.records import CandidateRecord

__all__ = [
    "LENGTH_METRICS",
    "LengthComparison",
    "LengthMetric",
    "command_chars",
    "length_comparison",
    "reasoning_tokens",
]

LengthMetric = Literal["reasoning_tokens", "command_chars"]
LENGTH_METRICS: tuple[LengthMetric, ...] = ("reasoning_tokens", "command_chars")


def reasoning_tokens(candidate: CandidateRecord) -> float:
    """Reasoning tokens of the generator call, as the provider reported them."""
    return float(candidate.usage.reasoning_tokens)


def command_chars(candidate: CandidateRecord) -> float:
    """Characters of the action's shell commands; 0 for an action without one (a final
    answer has no command, so a turn that stops counts as a turn with no characters)."""
    return float(len(command_of(candidate.tool_calls) or ""))


_MEASURES: dict[LengthMetric, Callable[[CandidateRecord], float]] = {
    "reasoning_tokens": reasoning_tokens,
    "command_chars": command_chars,
}


class LengthComparison(SettingRow):
    """Figure 5 for one setting and one measure: per-turn means of the picked candidate,
    the unpicked candidates and the baseline's executed action, with two bootstraps."""

    metric: LengthMetric
    """The measure: "reasoning_tokens" or "command_chars"."""
    turns: int
    """Counted turns of this setting; `picked` is their mean."""
    tasks: int
    """Tasks with counted turns."""
    picked: float
    """Mean per turn of the picked candidate's measure."""
    unpicked_turns: int
    """Counted turns with at least one unpicked ok candidate; `unpicked` is their mean."""
    unpicked: float | None
    """Mean over those turns of the mean over the turn's unpicked candidates."""
    baseline_setting: str
    """The setting compared with (`N=1`)."""
    baseline_turns: int
    """The baseline's counted turns."""
    baseline: float | None
    """Mean per turn of the baseline's executed action, None without a baseline."""
    vs_unpicked: BootstrapResult | None
    """Picked minus unpicked, per turn, averaged per task, bootstrapped over tasks."""
    vs_baseline: BootstrapResult | None
    """Per task, picked mean minus baseline mean, over the tasks both settings ran."""
    resamples: int
    """Bootstrap resamples."""

    def to_row(self) -> dict[str, Any]:
        """A flat dict: the two comparisons as `vs_unpicked_*` and `vs_baseline_*`.

        Returns:
            Every field by name, the comparisons' fields prefixed (None without one).
        """
        row = super().to_row()
        for name in ("vs_unpicked", "vs_baseline"):
            test: dict[str, Any] | None = row.pop(name)
            for key in BootstrapResult.model_fields:
                row[f"{name}_{key}"] = None if test is None else test[key]
        return row


def length_comparison(
    trajectories: Iterable[Trajectory],
    *,
    baseline: str = "N=1",
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[LengthComparison]:
    """Figure 5: per setting with N>1 (by N, then name) and per measure (reasoning
    tokens, command characters), picked vs unpicked vs the `baseline` setting.

    Without the baseline setting in `trajectories`, its fields and comparison are None.

    Args:
        trajectories: the run's attempts (`load_trajectories`).
        baseline: the setting compared with.
        resamples: bootstrap resamples.
        seed: seeds the resampling.
        confidence: the confidence interval's level.

    Returns:
        One row per setting and measure.

    Raises:
        ValueError: no setting has N>1, or none of their turns counts.
    """
    trajectories = list(trajectories)
    multi = {s: data for s, data in setting_order(trajectories, None).items() if data.pools}
    if not multi:
        raise no_multi(trajectories)
    base = setting_order((t for t in trajectories if t.setting == baseline), None, multi_only=False)
    base_pools = base[baseline].pools if baseline in base else []

    def bootstrap(diffs: Sequence[float]) -> BootstrapResult | None:
        if not diffs:
            return None
        return bootstrap_differences(diffs, resamples=resamples, seed=seed, confidence=confidence)

    results = []
    for name, data in multi.items():
        for metric, measure in _MEASURES.items():
            picked = [measure(p.candidates[p.picked]) for p in data.pools]
            # Per turn: (task, picked - mean of the others, mean of the others).
            pairs = []
            for pool, value in zip(data.pools, picked, strict=True):
                others = [measure(c) for i, c in enumerate(pool.candidates) if i != pool.picked]
                if others:
                    mean_other = sum(others) / len(others)
                    pairs.append((pool.task, value - mean_other, mean_other))
            base_values = [measure(p.candidates[p.picked]) for p in base_pools]
            picked_by_task = task_means(
                (p.task, v) for p, v in zip(data.pools, picked, strict=True)
            )
            base_by_task = task_means(
                (p.task, v) for p, v in zip(base_pools, base_values, strict=True)
            )
            shared = [t for t in picked_by_task if t in base_by_task]
            results.append(
                LengthComparison(
                    setting=name,
                    n=data.n,
                    metric=metric,
                    turns=len(picked),
                    tasks=len(picked_by_task),
                    picked=sum(picked) / len(picked),
                    unpicked_turns=len(pairs),
                    unpicked=sum(m for _, _, m in pairs) / len(pairs) if pairs else None,
                    baseline_setting=baseline,
                    baseline_turns=len(base_values),
                    baseline=sum(base_values) / len(base_values) if base_values else None,
                    vs_unpicked=bootstrap(list(task_means((t, d) for t, d, _ in pairs).values())),
                    vs_baseline=bootstrap([picked_by_task[t] - base_by_task[t] for t in shared]),
                    resamples=resamples,
                    **data.left_out(),
                )
            )
    return results

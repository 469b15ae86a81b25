"""Table 3 from verdicts: the share of judged trajectories flagged per rubric and
setting, and the difference from the baseline with a paired bootstrap over tasks."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel

from turnbon_graph.analysis.judge.rubrics import AppliesTo, Rubric, load_rubrics
from turnbon_graph.analysis.judge.run import JudgeVerdict
from turnbon_graph.bench.stats.metrics import bootstrap_differences

__all__ = ["FlaggedShare", "flagged_shares"]


class FlaggedShare(BaseModel):
    """One cell pair of Table 3 (or a row of Table 7): how often a rubric was flagged in a
    setting, and the difference from the baseline."""

    rubric: str
    """The rubric's id."""
    title: str
    """The rubric's title."""
    applies_to: AppliesTo
    """Which attempts it judges: "all", or "passed" only."""
    setting: str
    """The setting (`N=4`, ...)."""
    judged: int
    """Trajectories with a yes or no verdict (for "passed" rubrics: passing attempts)."""
    flagged: int
    """Judged trajectories the judge answered "yes" for."""
    unknown: int
    """Trajectories without a usable verdict; not in `judged`."""
    share: float | None
    """flagged / judged, or None when nothing was judged."""
    baseline: str
    """The setting compared with."""
    baseline_share: float | None = None
    """The baseline's own share (flagged / judged); None when nothing was judged there."""
    tasks: int = 0
    """Tasks judged in both this setting and the baseline (the bootstrap's units)."""
    difference: float | None = None
    """Mean over those tasks of (share here - share in the baseline); None for the baseline."""
    ci_low: float | None = None
    """The difference's confidence interval, lower end."""
    ci_high: float | None = None
    """The difference's confidence interval, upper end."""
    p_value: float | None = None
    """The difference's two-sided sign-flip p-value (over tasks)."""


def _setting_key(setting: str, baseline: str) -> tuple[bool, float, str]:
    head = setting.split()[0] if setting.split() else setting
    n = float(head[2:]) if head.startswith("N=") and head[2:].isdigit() else math.inf
    return (setting != baseline, n, setting)


def flagged_shares(
    verdicts: Iterable[JudgeVerdict],
    *,
    baseline: str = "N=1",
    rubrics: Sequence[Rubric] | None = None,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[FlaggedShare]:
    """Per rubric and setting, the share of judged trajectories flagged "yes" (unknown
    verdicts are left out of the denominator and counted apart), and for every other
    setting the difference from `baseline` with a paired bootstrap over tasks: per task,
    the share flagged over its trials here minus the same in the baseline.

    A "passed" rubric (reward hacking) is judged on passing attempts only, so its share
    is of passing attempts (Table 7), and only tasks with a judged passing attempt in
    both settings are paired.

    Args:
        verdicts: the judge's verdicts (`read_verdicts`).
        baseline: the setting the others are compared with.
        rubrics: the order and titles (default: the shipped ones); rubrics it does not
            know come after, by id.
        resamples: bootstrap resamples.
        seed: seeds the resampling.

    Returns:
        One row per rubric and setting.
    """
    known = {r.id: r for r in (rubrics if rubrics is not None else load_rubrics())}
    # rubric -> setting -> task -> [yes, no, unknown]
    counts: dict[str, dict[str, dict[str, list[int]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    )
    slot = {"yes": 0, "no": 1, "unknown": 2}
    for verdict in verdicts:
        counts[verdict.rubric][verdict.setting][verdict.task][slot[verdict.answer]] += 1
    order = [r for r in known if r in counts] + sorted(r for r in counts if r not in known)
    rows: list[FlaggedShare] = []
    for rid in order:
        rubric = known.get(rid)
        per_setting = counts[rid]
        base_tasks = _task_shares(per_setting.get(baseline, {}))
        base_share = _share(per_setting.get(baseline, {}))
        for setting in sorted(per_setting, key=lambda s: _setting_key(s, baseline)):
            tasks = per_setting[setting]
            yes = sum(c[0] for c in tasks.values())
            no = sum(c[1] for c in tasks.values())
            row = FlaggedShare(
                rubric=rid,
                title=rubric.title if rubric else rid,
                applies_to=rubric.applies_to if rubric else "all",
                setting=setting,
                judged=yes + no,
                flagged=yes,
                unknown=sum(c[2] for c in tasks.values()),
                share=yes / (yes + no) if yes + no else None,
                baseline=baseline,
                baseline_share=base_share,
            )
            here = _task_shares(tasks)
            paired = sorted(here.keys() & base_tasks.keys())
            if setting != baseline and paired:
                boot = bootstrap_differences(
                    [here[t] - base_tasks[t] for t in paired], resamples=resamples, seed=seed
                )
                row = row.model_copy(
                    update={
                        "tasks": boot.tasks,
                        "difference": boot.difference,
                        "ci_low": boot.ci_low,
                        "ci_high": boot.ci_high,
                        "p_value": boot.p_value,
                    }
                )
            rows.append(row)
    return rows


def _task_shares(tasks: Mapping[str, list[int]]) -> dict[str, float]:
    """Share flagged per task, over its judged trials (tasks with none judged left out)."""
    return {t: c[0] / (c[0] + c[1]) for t, c in tasks.items() if c[0] + c[1]}


def _share(tasks: Mapping[str, list[int]]) -> float | None:
    yes = sum(c[0] for c in tasks.values())
    judged = yes + sum(c[1] for c in tasks.values())
    return yes / judged if judged else None

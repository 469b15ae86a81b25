"""Which behaviours the selector prefers (the paper's Figure 4).

Figure 4. Every candidate of every turn is tagged with the behaviour tagger, given the
commands the episode executed before that turn. For each setting with N>1 and each
behaviour this compares

* the *picked share*: the share of turns whose executed pick shows the behaviour, with
* the *chance share*: the share expected under uniform random choice among that turn's
  candidates, i.e. the mean over turns of (candidates showing it / candidates),

and tests the gap with the paired bootstrap over tasks of `metrics.bootstrap_differences`
(per task: the mean over its turns, pooled across trials, of picked indicator minus the
turn's chance share).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from turnbon_graph.analysis.preference.turns import (
    History,
    SettingRow,
    no_multi,
    setting_order,
    task_means,
)
from turnbon_graph.analysis.trajectories import Trajectory, command_of
from turnbon_graph.bench.stats.metrics import bootstrap_differences
from turnbon_graph.records import CandidateRecord

__all__ = [
    "DECLARES_COMPLETE",
    "BehaviourPreference",
    "Tagger",
    "behaviour_preference",
    "candidate_tags",
    "default_tagger",
]

DECLARES_COMPLETE = "declares_complete"
"""The one behaviour a text-only answer (no shell command) can show."""


@dataclass(frozen=True)
class Tagger:
    """The behaviour tagger the analysis uses: the behaviours it reports, in order, and
    the two tagging functions (see `turnbon_graph.analysis.behaviours`)."""

    behaviours: tuple[str, ...]
    tag_command: Callable[[str, History | None], set[str]]
    declares_complete: Callable[[str], bool]


def default_tagger() -> Tagger:
    """The package's behaviour tagger (imported here, so this module loads without it)."""
    from turnbon_graph.analysis import behaviours

    return Tagger(behaviours.TAGS, behaviours.tag_command, behaviours.declares_complete)


def candidate_tags(candidate: CandidateRecord, history: History, tagger: Tagger) -> frozenset[str]:
    """The behaviours one candidate shows, given the episode's earlier executed commands.

    A shell command is tagged by `tag_command`; a text-only final answer can only
    declare completion; any other action (a non-shell tool call) shows none."""
    command = command_of(candidate.tool_calls)
    if command is not None:
        return frozenset(tagger.tag_command(command, history))
    text = candidate.content
    if not candidate.tool_calls and text and tagger.declares_complete(text):
        return frozenset({DECLARES_COMPLETE})
    return frozenset()


class BehaviourPreference(SettingRow):
    """Figure 4 for one setting and behaviour: picked share against chance, and the
    paired bootstrap over tasks of the gap."""

    behaviour: str
    """The behaviour (one of the tagger's)."""
    turns: int
    """Counted turns (across tasks and trials) the shares are over."""
    informative_turns: int
    """Counted turns whose candidates disagree on this behaviour (the others add 0)."""
    tasks: int
    """Tasks with counted turns (the bootstrap's units)."""
    picked_share: float
    """Share of counted turns whose pick shows the behaviour (the solid line)."""
    chance_share: float
    """Mean over counted turns of the share of the turn's candidates showing it (dashed)."""
    gap: float
    """picked_share - chance_share, over turns as plotted."""
    task_gap: float
    """The bootstrapped statistic: the mean over tasks of each task's mean per-turn gap,
    so each task counts once however long its episodes are."""
    ci_low: float
    """task_gap's confidence interval, lower end."""
    ci_high: float
    """task_gap's confidence interval, upper end."""
    p_value: float
    """Two-sided sign-flip p-value (over tasks) of task_gap against 0."""
    resamples: int
    """Bootstrap resamples."""


def behaviour_preference(
    trajectories: Iterable[Trajectory],
    *,
    tagger: Tagger | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[BehaviourPreference]:
    """Figure 4: per setting with N>1 (by N, then name) and per behaviour (in the
    tagger's order), the selector's picked share against the chance share.

    Args:
        trajectories: the run's attempts (`load_trajectories`).
        tagger: the behaviour tagger; None: the package's (`default_tagger`).
        resamples: bootstrap resamples.
        seed: seeds the resampling.
        confidence: the confidence interval's level.

    Returns:
        One row per setting and behaviour.

    Raises:
        ValueError: no setting has N>1, or none of their turns counts (see
            `preference.turns` for which turns count).
    """
    trajectories = list(trajectories)
    tagger = tagger or default_tagger()

    def tag(candidate: CandidateRecord, history: History) -> frozenset[str]:
        return candidate_tags(candidate, history, tagger)

    settings = {s: data for s, data in setting_order(trajectories, tag).items() if data.pools}
    if not settings:
        raise no_multi(trajectories)
    results = []
    for name, data in settings.items():
        tasks = {pool.task for pool in data.pools}
        for behaviour in tagger.behaviours:
            picked: list[float] = []
            chance: list[float] = []
            informative = 0
            for pool, tags in zip(data.pools, data.tagged, strict=True):
                shows = [behaviour in t for t in tags]
                picked.append(float(shows[pool.picked]))
                chance.append(sum(shows) / len(shows))
                informative += 0 < sum(shows) < len(shows)
            per_task = task_means(
                (pool.task, p - c) for pool, p, c in zip(data.pools, picked, chance, strict=True)
            )
            test = bootstrap_differences(
                list(per_task.values()), resamples=resamples, seed=seed, confidence=confidence
            )
            picked_share = sum(picked) / len(picked)
            chance_share = sum(chance) / len(chance)
            results.append(
                BehaviourPreference(
                    setting=name,
                    n=data.n,
                    behaviour=behaviour,
                    turns=len(data.pools),
                    informative_turns=informative,
                    tasks=len(tasks),
                    picked_share=picked_share,
                    chance_share=chance_share,
                    gap=picked_share - chance_share,
                    task_gap=test.difference,
                    ci_low=test.ci_low,
                    ci_high=test.ci_high,
                    p_value=test.p_value,
                    resamples=resamples,
                    **data.left_out(),
                )
            )
    return results

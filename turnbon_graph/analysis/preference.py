"""Which behaviours the selector prefers (the paper's Figure 4), and how long the
actions it picks are (Figure 5).

Figure 4. Every candidate of every turn is tagged with the behaviour tagger, given the
commands the episode executed before that turn. For each setting with N>1 and each
behaviour this compares

* the *picked share*: the share of turns whose executed pick shows the behaviour, with
* the *chance share*: the share expected under uniform random choice among that turn's
  candidates, i.e. the mean over turns of (candidates showing it / candidates),

and tests the gap with the paired bootstrap over tasks of `metrics.bootstrap_differences`
(per task: the mean over its turns, pooled across trials, of picked indicator minus the
turn's chance share).

Figure 5. Per turn, reasoning tokens and command characters of the picked candidate, the
mean of the turn's unpicked candidates, and the baseline setting's (N=1) executed action;
bootstrapped over tasks for picked minus unpicked (paired within the turn) and picked
minus baseline (paired by task).

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from turnbon_graph.analysis.trajectories import Trajectory, TurnView, command_of
from turnbon_graph.bench.metrics import BootstrapResult, bootstrap_differences
from turnbon_graph.records import CandidateRecord

History = Sequence[tuple[str, int | None]]
"""(command, exit code) of the commands an episode executed before a turn."""

DECLARES_COMPLETE = "declares_complete"
"""The one behaviour a text-only answer (no shell command) can show."""

AGREEMENT_SELECTOR = "agreement"
"""`TurnRecord.selector` when early commit picked the agreed action without a selector."""

TurnStatus = Literal["counted", "synthesized", "rule", "resampled", "unusable"]


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


@dataclass
class _Setting:
    n: int
    pools: list[_Pool]
    tagged: list[list[frozenset[str]]]
    """Per pool, the tags of each of its candidates (filled only when tagging)."""
    synthesized_turns: int = 0
    rule_turns: int = 0
    resampled_turns: int = 0


def _pool(task: str, turn: TurnView) -> _Pool:
    # The pick's position among the ok candidates: the ok ones recorded before it.
    index = turn.record.selected_index
    before = sum(c.error is None for c in turn.record.candidates[:index])
    return _Pool(task, turn.candidates, before)


def _settings(
    trajectories: Iterable[Trajectory], tagger: Tagger | None, *, multi_only: bool = True
) -> dict[str, _Setting]:
    """Counted pools of every setting (N>1 only, unless asked), ordered by N then name."""
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
                if tagger is not None:
                    setting.tagged.append(
                        [candidate_tags(c, history, tagger) for c in pool.candidates]
                    )
    return dict(sorted(found.items(), key=lambda item: (item[1].n, item[0])))


def _no_multi(trajectories: Sequence[Trajectory]) -> ValueError:
    seen = sorted({t.setting for t in trajectories})
    return ValueError(
        "no setting with N>1 in these trajectories (settings: "
        f"{', '.join(seen) or 'none'}): there is no choice among candidates to analyse"
    )


def _task_means(values: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Mean value per task (turns pooled across trials), tasks in sorted order."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for task, value in values:
        grouped[task].append(value)
    return {task: sum(v) / len(v) for task, v in sorted(grouped.items())}


class BehaviourPreference(BaseModel):
    """Figure 4 for one setting and behaviour: picked share against chance, and the
    paired bootstrap over tasks of the gap."""

    setting: str
    n: int
    behaviour: str
    turns: int
    """Counted turns (across tasks and trials) the shares are over."""
    informative_turns: int
    """Counted turns whose candidates disagree on this behaviour (the others add 0)."""
    tasks: int
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
    ci_high: float
    p_value: float
    """Two-sided paired-bootstrap p-value of task_gap against 0."""
    resamples: int
    synthesized_turns: int
    """Turns of this setting left out because a selector wrote the executed action."""
    rule_turns: int
    """Turns left out because a fallback or early commit, not the selector, picked."""
    resampled_turns: int
    """Turns left out because the selector rejected the first batch and a fresh one ran."""

    def to_row(self) -> dict[str, Any]:
        return self.model_dump()


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

    Raises ValueError when no setting has N>1 or none of their turns counts (see the
    module docstring for which turns count)."""
    trajectories = list(trajectories)
    tagger = tagger or default_tagger()
    settings = {s: data for s, data in _settings(trajectories, tagger).items() if data.pools}
    if not settings:
        raise _no_multi(trajectories)
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
            per_task = _task_means(
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
                    synthesized_turns=data.synthesized_turns,
                    rule_turns=data.rule_turns,
                    resampled_turns=data.resampled_turns,
                )
            )
    return results


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


class LengthComparison(BaseModel):
    """Figure 5 for one setting and one measure: per-turn means of the picked candidate,
    the unpicked candidates and the baseline's executed action, with two bootstraps."""

    setting: str
    n: int
    metric: LengthMetric
    turns: int
    """Counted turns of this setting; `picked` is their mean."""
    tasks: int
    picked: float
    unpicked_turns: int
    """Counted turns with at least one unpicked ok candidate; `unpicked` is their mean."""
    unpicked: float | None
    """Mean over those turns of the mean over the turn's unpicked candidates."""
    baseline_setting: str
    baseline_turns: int
    baseline: float | None
    """Mean per turn of the baseline's executed action, None without a baseline."""
    vs_unpicked: BootstrapResult | None
    """Picked minus unpicked, per turn, averaged per task, bootstrapped over tasks."""
    vs_baseline: BootstrapResult | None
    """Per task, picked mean minus baseline mean, over the tasks both settings ran."""
    resamples: int
    synthesized_turns: int
    rule_turns: int
    resampled_turns: int

    def to_row(self) -> dict[str, Any]:
        """A flat dict: the two comparisons as `vs_unpicked_*` and `vs_baseline_*`."""
        row = self.model_dump(exclude={"vs_unpicked", "vs_baseline"})
        for name in ("vs_unpicked", "vs_baseline"):
            test: BootstrapResult | None = getattr(self, name)
            for key in BootstrapResult.model_fields:
                row[f"{name}_{key}"] = None if test is None else getattr(test, key)
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
    Raises ValueError when no setting has N>1 or none of their turns counts."""
    trajectories = list(trajectories)
    multi = {s: data for s, data in _settings(trajectories, None).items() if data.pools}
    if not multi:
        raise _no_multi(trajectories)
    base = _settings((t for t in trajectories if t.setting == baseline), None, multi_only=False)
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
            picked_by_task = _task_means(
                (p.task, v) for p, v in zip(data.pools, picked, strict=True)
            )
            base_by_task = _task_means(
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
                    vs_unpicked=bootstrap(list(_task_means((t, d) for t, d, _ in pairs).values())),
                    vs_baseline=bootstrap([picked_by_task[t] - base_by_task[t] for t in shared]),
                    resamples=resamples,
                    synthesized_turns=data.synthesized_turns,
                    rule_turns=data.rule_turns,
                    resampled_turns=data.resampled_turns,
                )
            )
    return results


def to_rows(
    results: Iterable[BehaviourPreference | LengthComparison],
) -> list[dict[str, Any]]:
    """Plain dicts, one per result: `pandas.DataFrame(to_rows(...))` in a notebook."""
    return [result.to_row() for result in results]


def markdown_table(rows: Sequence[Mapping[str, Any]], *, digits: int = 3) -> str:
    """A Markdown table of `rows` (columns of the first row); floats rounded to `digits`
    significant digits, None as an empty cell."""
    if not rows:
        return ""
    columns = list(rows[0])

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:.{digits}g}"
        return str(value).replace("|", "\\|")

    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)

"""The paper's measurements as plain functions over episode results.

pass@k by the unbiased estimator, consistency (solved in all k of n trials), mean pass
rate, outcome shares (Table 2), the cost table relative to the baseline (Table 1), and a
paired bootstrap over tasks for comparing two settings (the exploration/exploitation
decomposition is `decomposition`). Notebooks and `turnbon report` use the same code.
"""

from __future__ import annotations

import importlib
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from math import comb
from typing import Any, get_args

from pydantic import BaseModel

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.bootstrap import BootstrapResult as BootstrapResult
from turnbon_graph.bench.stats.bootstrap import bootstrap_differences as bootstrap_differences
from turnbon_graph.records import Usage

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
"""Every ending, in the order the report shows them."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts drawn from n (c of them correct)
    passes: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    Args:
        n: attempts made.
        c: attempts that passed.
        k: attempts drawn; one passing is enough.

    Returns:
        The probability, 0 to 1.

    Raises:
        ValueError: not 0 <= c <= n, or not 1 <= k <= n.
    """
    _check_draw(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def consistency_at_k(n: int, c: int, k: int) -> float:
    """Probability that all k attempts drawn from n pass: C(c, k) / C(n, k).

    Args:
        n: attempts made.
        c: attempts that passed.
        k: attempts drawn; every one must pass.

    Returns:
        The probability, 0 to 1 (0 when fewer than k passed).

    Raises:
        ValueError: as for `pass_at_k`.
    """
    _check_draw(n, c, k)
    return comb(c, k) / comb(n, k)


def _check_draw(n: int, c: int, k: int) -> None:
    """Raises ValueError unless k of n attempts, c of them correct, can be drawn."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def by_setting(results: Iterable[EpisodeResult]) -> dict[str, list[EpisodeResult]]:
    """The results grouped by setting (`N=4`, ...), in the order settings first appear.

    Args:
        results: episode results of any settings.

    Returns:
        Each setting's results.
    """
    grouped: dict[str, list[EpisodeResult]] = defaultdict(list)
    for result in results:
        grouped[result.setting].append(result)
    return dict(grouped)


def tampered(results: Iterable[EpisodeResult]) -> tuple[int, int]:
    """How many attempts the verifier found tamper evidence in, and how many of those
    passed.

    Args:
        results: episode results, of one setting or several.

    Returns:
        (attempts with tamper evidence, of them passed).
    """
    flagged = [r for r in results if r.tamper]
    return len(flagged), sum(r.passed for r in flagged)


def per_task(results: Iterable[EpisodeResult]) -> dict[str, tuple[int, int]]:
    """(attempts, passes) per task.

    Args:
        results: episode results, of one setting or several.

    Returns:
        Each task's attempts and passes.
    """
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        counts[result.task][0] += 1
        counts[result.task][1] += result.passed
    return {task: (n, c) for task, (n, c) in counts.items()}


def curve(
    results: Iterable[EpisodeResult], metric: Callable[[int, int, int], float]
) -> dict[int, float]:
    """The metric averaged over tasks for every k up to the smallest trial count.

    Args:
        results: one setting's episode results.
        metric: `(n, c, k) -> value`, such as `pass_at_k`.

    Returns:
        The average per k (1, 2, ...); empty without results.
    """
    tasks = per_task(results)
    if not tasks:
        return {}
    max_k = min(n for n, _ in tasks.values())
    return {
        k: sum(metric(n, c, k) for n, c in tasks.values()) / len(tasks) for k in range(1, max_k + 1)
    }


def pass_at_k_curve(results: Iterable[EpisodeResult]) -> dict[int, float]:
    """pass@k averaged over tasks; pass@1 is the mean pass rate over trials.

    Args:
        results: one setting's episode results.

    Returns:
        pass@k per k.
    """
    return curve(results, pass_at_k)


def consistency_curve(results: Iterable[EpisodeResult]) -> dict[int, float]:
    """Share of tasks solved in all k of the trials (expected over k-subsets).

    Args:
        results: one setting's episode results.

    Returns:
        The share per k.
    """
    return curve(results, consistency_at_k)


def outcome_shares(results: Sequence[EpisodeResult]) -> dict[Outcome, float]:
    """How the attempts ended (the paper's Table 2).

    Args:
        results: one setting's episode results.

    Returns:
        The share of attempts per outcome, every outcome listed (0 without results).
    """
    total = len(results)
    return {o: (sum(r.outcome == o for r in results) / total if total else 0.0) for o in OUTCOMES}


def turns_to_solve(results: Iterable[EpisodeResult]) -> dict[str, float]:
    """Turns per task, averaged over its passing trials (tasks never solved are left out).

    Args:
        results: one setting's episode results.

    Returns:
        The average turns per solved task.
    """
    turns: dict[str, list[int]] = defaultdict(list)
    for result in results:
        if result.passed:
            turns[result.task].append(result.turns)
    return {task: sum(t) / len(t) for task, t in turns.items()}


def episode_tokens(result: EpisodeResult) -> int:
    """Prompt plus completion tokens of every call of the episode: generator, selector,
    value and rollout (for rows written before `tokens`, from their usage).

    Args:
        result: one episode's result.

    Returns:
        The tokens.
    """
    if result.tokens is not None:
        return result.tokens
    usage = result.usage.generator.total_tokens + result.usage.selector.total_tokens
    return usage + (result.value_usage.total_tokens if result.value_usage else 0)


def usages(result: EpisodeResult) -> list[Usage]:
    """Every kind of call's usage of an episode: generator, selector, value, rollout.

    Args:
        result: one episode's result.

    Returns:
        The usages it has (value and rollout only where the episode made such calls).
    """
    found = [result.usage.generator, result.usage.selector]
    search = result.search
    return found + [u for u in (result.value_usage, search.rollout if search else None) if u]


class CostRow(BaseModel):
    """One row of the paper's Table 1 (per-attempt averages)."""

    setting: str
    """The setting (`N=4`, ...)."""
    attempts: int
    """Its attempts."""
    average_turns: float
    """Turns per attempt."""
    generator_tokens: float
    """The candidates' output tokens per attempt."""
    selector_tokens: float
    """The selector's output tokens per attempt."""
    value_tokens: float = 0.0
    """A search's value calls (output tokens); 0 without a value model."""
    rollout_tokens: float = 0.0
    """lookahead's rollouts (output tokens); 0 for the other strategies."""
    total_vs_baseline: float | None
    """Output tokens of every call relative to the baseline's; None without one."""

    @property
    def output_tokens(self) -> float:
        """Output tokens of every call per attempt."""
        return (
            self.generator_tokens + self.selector_tokens + self.value_tokens + self.rollout_tokens
        )


def cost_table(results: Iterable[EpisodeResult], baseline: str = "N=1") -> list[CostRow]:
    """Table 1: average turns and output tokens per attempt, total relative to baseline.

    Like the paper, tokens are output (completion) tokens: all N candidates for the
    generator, every selector call for the selector, and a search's value and rollout
    calls, which its total counts as the strategies' comparison does.

    Args:
        results: episode results of every setting.
        baseline: the setting the totals are relative to.

    Returns:
        One row per setting, by N.
    """
    groups = by_setting(results)

    def output(rs: list[EpisodeResult]) -> CostRow:
        def mean(tokens: Callable[[EpisodeResult], int]) -> float:
            return sum(tokens(r) for r in rs) / len(rs)

        return CostRow(
            setting=rs[0].setting,
            attempts=len(rs),
            average_turns=mean(lambda r: r.turns),
            generator_tokens=mean(lambda r: r.usage.generator.completion_tokens),
            selector_tokens=mean(lambda r: r.usage.selector.completion_tokens),
            value_tokens=mean(lambda r: r.value_usage.completion_tokens if r.value_usage else 0),
            rollout_tokens=mean(
                lambda r: r.search.rollout.completion_tokens if r.search is not None else 0
            ),
            total_vs_baseline=None,
        )

    base = output(groups[baseline]).output_tokens if baseline in groups else None
    rows = []
    for _, rs in sorted(groups.items(), key=lambda item: _n_of(item[0])):
        row = output(rs)
        row.total_vs_baseline = row.output_tokens / base if base else None
        rows.append(row)
    return rows


def _n_of(setting: str) -> tuple[int, str]:
    head = setting.split()[0]
    return (
        (int(head[2:]), setting) if head.startswith("N=") and head[2:].isdigit() else (0, setting)
    )


class PairedComparison(BootstrapResult):
    """Setting B minus setting A in mean pass rate, paired by task, with a bootstrap."""

    a: str
    """Setting A's name."""
    b: str
    """Setting B's name."""


def paired_bootstrap(
    a: Iterable[EpisodeResult],
    b: Iterable[EpisodeResult],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedComparison:
    """Resample tasks (shared by both settings) with replacement; each task contributes
    its mean pass rate over trials in each setting.

    Args:
        a: setting A's episode results.
        b: setting B's episode results.
        resamples: bootstrap resamples.
        seed: seeds the resampling.
        confidence: the confidence interval's level.

    Returns:
        B minus A in mean pass rate, with its interval and p-value.

    Raises:
        ValueError: the settings share no task.
    """
    a_list, b_list = list(a), list(b)
    rate_a = {t: c / n for t, (n, c) in per_task(a_list).items()}
    rate_b = {t: c / n for t, (n, c) in per_task(b_list).items()}
    tasks = sorted(rate_a.keys() & rate_b.keys())
    if not tasks:
        raise ValueError("the two settings share no task: nothing to pair")
    result = bootstrap_differences(
        [rate_b[t] - rate_a[t] for t in tasks],
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
    return PairedComparison(
        a=a_list[0].setting if a_list else "",
        b=b_list[0].setting if b_list else "",
        **result.model_dump(),
    )


DECOMPOSITION_NAMES = ("Exploration", "exploration", "leaves_of")
"""Names that moved to `decomposition`, still found here for one minor version."""


def __getattr__(name: str) -> Any:
    if name in DECOMPOSITION_NAMES:
        new = "turnbon_graph.bench.stats.decomposition"
        warnings.warn(
            f"{__name__}.{name} moved to {new}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

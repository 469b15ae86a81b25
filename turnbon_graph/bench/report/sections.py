"""The result sections of `turnbon report`, one function each: pass rate, pass@k and
consistency, cost (Table 1), how attempts end (Table 2), turns to solve, the paired
comparison against the baseline, per task, the attempts an error stopped, and the
attempts with tamper evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median

from turnbon_graph.bench.report.format import (
    DASH,
    NEEDED_EXPLAINED,
    NEEDED_HEADER,
    cell,
    image,
    interval,
    needed,
    p_value,
    pct,
    pp,
    ratio,
    section,
    short,
    table,
    tokens,
)
from turnbon_graph.bench.running.runs import EpisodeResult, RunSettings
from turnbon_graph.bench.stats import metrics

OUTCOME_HEADERS = {
    "pass": "Pass ↑",
    "wrong_submission": "Wrong submission ↓",
    "out_of_context": "Out of context ↓",
    "time_limit": "Time limit ↓",
    "resource_limit": "Resource limit ↓",
    "budget_exhausted": "Budget exhausted ↓",
    "verifier_failed": "Verifier failed ↓",
    "agent_error": "Agent error ↓",
}
ERRORS_SHOWN = 20
"""Distinct errors listed; the rest are counted."""
TAMPER_SHOWN = 20
"""Attempts with tamper evidence listed; the rest are counted."""


def pass_rates(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
    """The report's pass-rate section (Figure 2a): attempts, passes and pass@1 per setting."""
    from turnbon_graph.bench.report.plots import trial_pass_rates

    rows = []
    for setting in order:
        rs = groups[setting]
        curve = metrics.pass_at_k_curve(rs)
        per_trial = " / ".join(pct(r) for r in trial_pass_rates(rs))
        passed = sum(r.passed for r in rs)
        rows.append((setting, str(len(rs)), str(passed), pct(curve[1]), per_trial))
    return [
        *section(
            "## Pass rate (Figure 2a)",
            "Mean pass rate is pass@1 averaged over trials, as in the paper's Figure 2a: each "
            "task's share of passing trials, averaged over tasks.",
            ["Setting", "Attempts", "Passed", "Mean pass rate", "Per trial"],
            rows,
        ),
        *image(plots, "pass_rate", "Figure 2a: mean pass rate per setting"),
    ]


def curves(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
    """The report's pass@k and consistency sections (Figures 2b and 3b)."""
    lines: list[str] = []
    for title, alt, explain, metric, plot in (
        (
            "pass@k (Figure 2b)",
            "Figure 2b: pass@k over k trials",
            "pass@k: the chance that at least one of k trials drawn from a task's trials "
            "passes (unbiased estimator), averaged over tasks (Figure 2b).",
            metrics.pass_at_k_curve,
            "pass_at_k",
        ),
        (
            "Consistency (Figure 3b)",
            "Figure 3b: consistency, solved in all k trials",
            "Consistency@k: the chance that all k trials drawn pass, averaged over tasks; at "
            "k = trials it is the share of tasks solved in every trial (Figure 3b).",
            metrics.consistency_curve,
            "consistency",
        ),
    ):
        curves = {s: metric(groups[s]) for s in order}
        max_k = max((max(c) for c in curves.values() if c), default=0)
        ks = range(1, max_k + 1)
        rows = [(s, *(pct(curves[s][k]) if k in curves[s] else DASH for k in ks)) for s in order]
        lines += [
            f"## {title}",
            "",
            explain,
            "",
            *table(["Setting", *(f"k={k}" for k in ks)], rows),
            "",
            *image(plots, plot, alt),
        ]
    return lines


def costs(
    results: Sequence[EpisodeResult],
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    baseline: str,
    plots: Mapping[str, str],
) -> list[str]:
    """The report's cost section (Table 1): output and prompt tokens per attempt, against the
    baseline."""
    by_setting = {row.setting: row for row in metrics.cost_table(results, baseline)}
    searched = any(r.value_usage is not None or r.search is not None for r in results)
    output_rows = []
    for setting in order:
        row = by_setting[setting]
        no_selector = setting == baseline and row.selector_tokens == 0
        extra = (tokens(row.value_tokens), tokens(row.rollout_tokens)) if searched else ()
        output_rows.append(
            (
                setting,
                str(row.attempts),
                f"{row.average_turns:.1f}",
                tokens(row.generator_tokens),
                DASH if no_selector else tokens(row.selector_tokens),
                *extra,
                ratio(row.total_vs_baseline),
            )
        )

    def all_tokens(rs: Sequence[EpisodeResult]) -> int:
        return sum(metrics.episode_tokens(r) for r in rs)

    base = all_tokens(groups[baseline]) / len(groups[baseline]) if baseline in groups else None
    prompt_rows = []
    for setting in order:
        rs = groups[setting]
        per_attempt = all_tokens(rs) / len(rs)
        costs = [u.cost_usd for r in rs for u in metrics.usages(r)]
        known = [c for c in costs if c is not None]
        each = [r.prompt_tokens_a_call_each for r in rs]
        prompt_rows.append(
            (
                setting,
                tokens(sum(r.usage.generator.prompt_tokens for r in rs) / len(rs)),
                DASH if None in each else tokens(sum(e or 0 for e in each) / len(rs)),
                tokens(sum(r.usage.selector.prompt_tokens for r in rs) / len(rs)),
                tokens(per_attempt),
                ratio(per_attempt / base if base else None),
                tokens(all_tokens(rs)),
                f"${sum(known):.4f}" if known else DASH,
            )
        )
    return [
        "## Cost (Table 1)",
        "",
        "Per-attempt averages. As in the paper, tokens here are **output** (completion) "
        "tokens: the generator's across all N candidates, the selector's over all its calls"
        + (", a search's value calls and lookahead's rollouts" if searched else "")
        + f"; the last column is their sum relative to the baseline's ({DASH} marks no "
        "selector).",
        "",
        *table(
            [
                "Setting",
                "Attempts",
                "Average turns",
                "Generator tokens",
                "Selector tokens",
                *(["Value tokens", "Rollout tokens"] if searched else []),
                "Total (vs base)",
            ],
            output_rows,
        ),
        "",
        "Prompt (input) tokens usually dominate what a run costs, since every turn resends "
        "the whole transcript to the generator and to the selector. A turn whose N "
        "candidates came from one call with `n` (the default where the endpoint takes it) "
        "is billed its prompt once; the next column says what a call per candidate would "
        f"have billed ({DASH}: runs recorded before it was kept). All tokens: prompt plus "
        "completion of every call, value and rollout calls included, as the strategies' "
        "comparison counts them:",
        "",
        *table(
            [
                "Setting",
                "Generator prompt / attempt",
                "… with a call per candidate",
                "Selector prompt / attempt",
                "All tokens / attempt",
                "All (vs base)",
                "All tokens, setting total",
                "Cost (USD), setting total",
            ],
            prompt_rows,
        ),
        "",
        *image(plots, "token_cost", "Table 1 as bars: tokens per attempt"),
    ]


def outcomes(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    """The report's outcomes section (Table 2): how the attempts of each setting ended."""
    rows = []
    for setting in order:
        shares = metrics.outcome_shares(groups[setting])
        rows.append(
            (setting, str(len(groups[setting])), *(pct(shares[o]) for o in metrics.OUTCOMES))
        )
    return section(
        "## How attempts end (Table 2)",
        "Share of attempts by ending, as in the paper's Table 2 (each attempt assigned its "
        "ending by the rules of its Table 5): only an attempt that ended on its own can "
        "pass or be a wrong submission; a context overflow, the time limit, a resource "
        "limit (memory or storage over the task's budget), a token budget that could not "
        "afford one model call (budget exhausted: the agent never acted), a verifier whose "
        "own set-up failed before its tests ran (verifier failed: no verdict on the work) "
        "or any other exception (including a verifier that could not start) ends it "
        "otherwise.",
        ["Setting", "Attempts", *(OUTCOME_HEADERS[o] for o in metrics.OUTCOMES)],
        rows,
    )


def turns(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
    """The report's turns-to-solve section: per setting, the turns its solved tasks took."""
    per_setting = {s: metrics.turns_to_solve(groups[s]) for s in order}
    rows = []
    for setting in order:
        values = list(per_setting[setting].values())
        if values:
            stats = (
                f"{median(values):.1f}",
                f"{sum(values) / len(values):.1f}",
                f"{min(values):.1f}",
                f"{max(values):.1f}",
            )
        else:
            stats = (DASH, DASH, DASH, DASH)
        rows.append((setting, str(len(values)), *stats))
    tasks = sorted({t for values in per_setting.values() for t in values})
    task_rows = [
        (
            cell(task),
            *(f"{per_setting[s][task]:.1f}" if task in per_setting[s] else DASH for s in order),
        )
        for task in tasks
    ]
    lines = [
        "## Turns to solve (Figure 3a)",
        "",
        "Turns a task took, averaged over its passing trials; tasks a setting never "
        "solved are left out of its numbers.",
        "",
        *table(["Setting", "Tasks solved", "Median", "Mean", "Min", "Max"], rows),
        "",
    ]
    if task_rows:
        lines += [
            f"Per task ({DASH}: not solved in that setting):",
            "",
            *table(["Task", *order], task_rows),
            "",
        ]
    return lines + image(plots, "turns_to_solve", "Figure 3a: turns to solve")


def comparison(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    baseline: str,
    resamples: int,
    seed: int,
) -> list[str]:
    """The report's paired bootstrap of every setting against the baseline."""
    lines = [
        "## Against the baseline (paired bootstrap over tasks, as in Figures 4 and 5)",
        "",
    ]
    if baseline not in groups:
        return [*lines, f"No `{baseline}` setting in this run: nothing to compare against.", ""]
    others = [s for s in order if s != baseline]
    if not others:
        return [*lines, f"Only `{baseline}` ran: nothing to compare against.", ""]
    rows = []
    for setting in others:
        try:
            c = metrics.paired_bootstrap(
                groups[baseline], groups[setting], resamples=resamples, seed=seed
            )
        except ValueError:
            rows.append((setting, DASH, "no task in common with the baseline", DASH, "0", DASH))
            continue
        rows.append(
            (
                setting,
                pp(c.difference),
                interval(c.ci_low, c.ci_high),
                p_value(c.p_value),
                str(c.tasks),
                needed(c.tasks_needed),
            )
        )
    return [
        *lines,
        f"Mean pass rate of each setting minus `{baseline}`'s, in percentage points, over the "
        f"tasks both ran: its 95% interval from {resamples:,} resamples of tasks with "
        f"replacement (seed {seed}), and the two-sided p-value of the exact sign-flip test "
        f"over tasks (fewer than 6 tasks can never reach 0.05). {NEEDED_EXPLAINED}",
        "",
        *table(["Setting", "Difference", "95% CI", "p-value", "Tasks", NEEDED_HEADER], rows),
        "",
    ]


def per_task(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    settings: RunSettings | None,
) -> list[str]:
    """The report's per-task table: passes of every setting, by task."""
    counts = {s: metrics.per_task(groups[s]) for s in order}
    every = [r for s in order for r in groups[s]]
    known = {r.task for r in every}
    tasks = [t for t in settings.tasks if t in known] if settings else []
    tasks += sorted(known - set(tasks))
    category = {r.task: r.category for r in every if r.category}
    difficulty = {r.task: r.difficulty for r in every if r.difficulty}
    extra = (["Category"] if category else []) + (["Difficulty"] if difficulty else [])
    rows = []
    for task in tasks:
        labels = ([cell(category.get(task) or "")] if category else []) + (
            [cell(difficulty.get(task) or "")] if difficulty else []
        )
        cells = []
        for setting in order:
            n, c = counts[setting].get(task, (0, 0))
            cells.append(f"{c}/{n}" if n else DASH)
        rows.append((cell(task), *labels, *cells))
    return [
        "## Per task",
        "",
        "Passing trials / finished trials.",
        "",
        *table(["Task", *extra, *order], rows, left=1 + len(extra)),
        "",
    ]


def errors(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    """Attempts that an exception stopped, one row per distinct error (they repeat)."""
    seen: dict[tuple[str, str, str], list[EpisodeResult]] = {}
    for setting in order:
        for r in groups[setting]:
            if r.error:
                seen.setdefault((r.setting, r.outcome, short(r.error)), []).append(r)
    if not seen:
        return []
    rows = []
    for (setting, outcome, text), rs in list(seen.items())[:ERRORS_SHOWN]:
        tasks = sorted({r.task for r in rs})
        shown = ", ".join(tasks[:5]) + (f" (+{len(tasks) - 5})" if len(tasks) > 5 else "")
        rows.append((setting, outcome, cell(shown), cell(text), str(len(rs))))
    more = len(seen) - len(rows)
    return [
        "## Attempts stopped by an error",
        "",
        *table(["Setting", "Outcome", "Tasks", "Error", "Attempts"], rows, left=4),
        "",
        *([f"... and {more} more distinct errors (see `episodes.jsonl`).", ""] if more else []),
    ]


def tamper(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    """Attempts whose verifier saw the deliverable meddle with its verification, per
    setting and one row each (none: no section)."""
    counts = {s: metrics.tampered(groups[s]) for s in order}
    if not any(flagged for flagged, _ in counts.values()):
        return []
    rows = [(s, str(len(groups[s])), str(n), str(p)) for s, (n, p) in counts.items()]
    flagged = [r for s in order for r in groups[s] if r.tamper]
    listed = [
        (r.setting, cell(r.task), str(r.trial), r.outcome, cell(short("; ".join(r.tamper))))
        for r in flagged[:TAMPER_SHOWN]
    ]
    more = len(flagged) - len(listed)
    return [
        "## Tamper evidence",
        "",
        "Attempts in which the verifier saw the deliverable touch pytest's hooks, reports, "
        "plugins or modules, the report file, `os._exit` or `atexit`, or found bytecode or "
        "source naming them in the work folder (docs/verifier.md says what it can and "
        "cannot see). Evidence, not a verdict: a passed attempt among them may have "
        "forged its pass; `turnbon judge` shows the evidence to its reward-hacking rubric.",
        "",
        *table(["Setting", "Attempts", "With evidence", "Of them passed"], rows),
        "",
        *table(["Setting", "Task", "Trial", "Outcome", "Evidence"], listed, left=5),
        "",
        *([f"... and {more} more (see `episodes.jsonl`, field `tamper`).", ""] if more else []),
    ]

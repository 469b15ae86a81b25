"""`turnbon report`: a run folder as a Markdown report with the paper's tables and plots.

Every number comes from `turnbon_graph.bench.metrics` (the same code notebooks use); this module
only arranges and formats them. It never imports LiteLLM or LangGraph, and it writes the
Markdown even when matplotlib (the `plots` extra) is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import median

from pydantic import ValidationError

from turnbon_graph.bench import metrics
from turnbon_graph.bench.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    EpisodeResult,
    RunSettings,
    read_episodes,
    setting_label,
)
from turnbon_graph.errors import ConfigurationError

REPORT_FILE = "report.md"
REPORT_DIR = "report"
_OUTCOME_HEADERS = {
    "pass": "Pass ↑",
    "wrong_submission": "Wrong submission ↓",
    "out_of_context": "Out of context ↓",
    "time_limit": "Time limit ↓",
    "agent_error": "Agent error ↓",
}
_ERRORS_SHOWN = 20
DASH = "\u2013"  # the paper's mark for "none" / "not applicable"
TIMES = "\u00d7"


def write_report(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    baseline: str = "N=1",
    resamples: int = 10_000,
    seed: int = 0,
) -> Path:
    """Writes `report.md` (and the PNG plots beside it) for a run; returns its path.

    The default destination is `run_dir/report/`. A run with no finished episode yet, or
    only some, still gets a report that says so."""
    run_dir = Path(run_dir)
    settings = read_settings(run_dir)
    results = read_episodes(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    order = setting_order(results, settings)

    plot_files: dict[str, str] = {}
    plots_note: str | None = None
    if results:
        from turnbon_graph.bench import plots

        if plots.plots_available():
            written = plots.write_plots(results, out, settings=order, baseline=baseline)
            plot_files = {name: path.name for name, path in written.items()}
        else:
            plots_note = (
                f"Plots were skipped: matplotlib is not installed. Install it with "
                f"`{plots.PLOTS_INSTALL}` and run `turnbon report {run_dir}` again."
            )

    text = render_report(
        run_dir,
        settings,
        results,
        baseline=baseline,
        resamples=resamples,
        seed=seed,
        plot_files=plot_files,
        plots_note=plots_note,
    )
    path = out / REPORT_FILE
    path.write_text(text, encoding="utf-8")
    return path


def read_settings(run_dir: Path) -> RunSettings | None:
    """The run's settings, None if only episodes exist; an error if it is no run folder."""
    path = run_dir / SETTINGS_FILE
    if not path.exists():
        if (run_dir / EPISODES_FILE).exists():
            return None
        raise ConfigurationError(
            f"{run_dir} is not a run folder (it has no {SETTINGS_FILE} or {EPISODES_FILE}); "
            "pass the folder that `turnbon bench` printed when it started"
        )
    try:
        return RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ConfigurationError(
            f"{path} is not a readable run settings file ({exc.error_count()} problem(s), "
            f"first: {exc.errors()[0]['msg']}); was it written by `turnbon bench`?"
        ) from exc


def setting_order(results: Iterable[EpisodeResult], settings: RunSettings | None) -> list[str]:
    """The run's settings by N (baseline first), then any others found in the episodes."""
    ns: dict[str, int] = {}
    if settings is not None:
        ns.update({setting_label(n): n for n in settings.n_values})
    for result in results:
        ns.setdefault(result.setting, result.n)
    return sorted(ns, key=lambda s: (ns[s], s))


def one_line_summary(results: Sequence[EpisodeResult], order: Sequence[str] | None = None) -> str:
    """E.g. `N=1: 25.0% pass (3/12) · N=4: 75.0% pass (9/12)`."""
    groups = metrics.by_setting(results)
    parts = []
    for setting in order or setting_order(results, None):
        rs = groups.get(setting, [])
        passed = sum(r.passed for r in rs)
        rate = passed / len(rs) if rs else 0.0
        parts.append(f"{setting}: {_pct(rate)} pass ({passed}/{len(rs)})")
    return " · ".join(parts) if parts else "no finished episodes"


def render_report(
    run_dir: Path,
    settings: RunSettings | None,
    results: Sequence[EpisodeResult],
    *,
    baseline: str = "N=1",
    resamples: int = 10_000,
    seed: int = 0,
    plot_files: Mapping[str, str] | None = None,
    plots_note: str | None = None,
) -> str:
    """The report's Markdown (pure: reads and writes nothing)."""
    order = setting_order(results, settings)
    groups = metrics.by_setting(results)
    plots = plot_files or {}
    lines = [f"# Turn-BoN run report: `{run_dir.name}`", ""]
    lines += _summary(run_dir, settings, results, order, baseline)
    if not results:
        lines += [
            "**No finished episodes yet.** Start or resume the run with the same "
            f"`turnbon bench` arguments and `--run {run_dir}`, then run "
            f"`turnbon report {run_dir}` again.",
            "",
        ]
        return "\n".join(lines)
    if plots_note:
        lines += [f"> {plots_note}", ""]
    if baseline not in groups:
        lines += [
            f"> No `{baseline}` setting in this run: columns relative to the baseline and "
            "the paired comparison are left out (`turnbon report --baseline SETTING` picks "
            "another one).",
            "",
        ]
    present = [s for s in order if s in groups]
    lines += _pass_rates(present, groups, plots)
    lines += _curves(present, groups, plots)
    lines += _costs(results, present, groups, baseline, plots)
    lines += _outcomes(present, groups)
    lines += _turns(present, groups, plots)
    lines += _comparison(present, groups, baseline, resamples, seed)
    lines += _per_task(present, groups, settings)
    lines += _errors(present, groups)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- sections


def _summary(
    run_dir: Path,
    settings: RunSettings | None,
    results: Sequence[EpisodeResult],
    order: Sequence[str],
    baseline: str,
) -> list[str]:
    tasks = sorted({r.task for r in results}) if settings is None else settings.tasks
    trials = settings.trials if settings else max((r.trial + 1 for r in results), default=0)
    labels = [f"{s} (baseline)" if s == baseline else s for s in order]
    rows = [
        ("Run folder", f"`{run_dir}`"),
        ("Environment", settings.environment if settings else "unknown (no run.json)"),
        ("Model", f"`{settings.model}`" if settings else "unknown"),
        ("Selector", f"`{settings.selector}`" if settings else "unknown"),
        ("Settings", ", ".join(labels) or "none"),
        ("Tasks", str(len(tasks))),
        ("Trials", str(trials)),
    ]
    expected = len(tasks) * trials * len(order) if settings else None
    finished = len(results)
    rows.append(("Episodes", f"{finished} of {expected} finished" if expected else str(finished)))
    if settings and settings.created:
        rows.append(("Started", settings.created))
    lines = ["## Summary", "", *_table(["", ""], rows, left=2), ""]
    if expected and 0 < finished < expected:
        groups = metrics.by_setting(results)
        per = len(tasks) * trials
        missing = ", ".join(
            f"{s} {len(groups.get(s, []))}/{per}" for s in order if len(groups.get(s, [])) < per
        )
        lines += [
            f"> **Partial run:** {finished} of {expected} episodes have finished ({missing}). "
            "The numbers below cover only those; pass@k and consistency stop at the fewest "
            "trials any task has. Resume with the same `turnbon bench` arguments and "
            f"`--run {run_dir}`.",
            "",
        ]
    return lines


def _pass_rates(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
    from turnbon_graph.bench.plots import trial_pass_rates

    rows = []
    for setting in order:
        rs = groups[setting]
        curve = metrics.pass_at_k_curve(rs)
        per_trial = " / ".join(_pct(r) for r in trial_pass_rates(rs))
        passed = sum(r.passed for r in rs)
        rows.append((setting, str(len(rs)), str(passed), _pct(curve[1]), per_trial))
    return [
        "## Pass rate",
        "",
        "Mean pass rate is pass@1 averaged over trials (the paper's Figure 2a): each task's "
        "share of passing trials, averaged over tasks.",
        "",
        *_table(["Setting", "Attempts", "Passed", "Mean pass rate", "Per trial"], rows),
        "",
        *_image(plots, "pass_rate", "Mean pass rate per setting"),
    ]


def _curves(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
    lines: list[str] = []
    for title, explain, metric, plot in (
        (
            "pass@k",
            "pass@k: the chance that at least one of k trials drawn from a task's trials "
            "passes (unbiased estimator), averaged over tasks (Figure 2b).",
            metrics.pass_at_k_curve,
            "pass_at_k",
        ),
        (
            "Consistency",
            "Consistency@k: the chance that all k trials drawn pass, averaged over tasks; at "
            "k = trials it is the share of tasks solved in every trial (Figure 3b).",
            metrics.consistency_curve,
            "consistency",
        ),
    ):
        curves = {s: metric(groups[s]) for s in order}
        max_k = max((max(c) for c in curves.values() if c), default=0)
        ks = range(1, max_k + 1)
        rows = [(s, *(_pct(curves[s][k]) if k in curves[s] else DASH for k in ks)) for s in order]
        lines += [
            f"## {title}",
            "",
            explain,
            "",
            *_table(["Setting", *(f"k={k}" for k in ks)], rows),
            "",
            *_image(plots, plot, title),
        ]
    return lines


def _costs(
    results: Sequence[EpisodeResult],
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    baseline: str,
    plots: Mapping[str, str],
) -> list[str]:
    table = {row.setting: row for row in metrics.cost_table(results, baseline)}
    output_rows = []
    for setting in order:
        row = table[setting]
        no_selector = setting == baseline and row.selector_tokens == 0
        output_rows.append(
            (
                setting,
                str(row.attempts),
                f"{row.average_turns:.1f}",
                _tokens(row.generator_tokens),
                DASH if no_selector else _tokens(row.selector_tokens),
                _ratio(row.total_vs_baseline),
            )
        )

    def all_tokens(rs: Sequence[EpisodeResult]) -> int:
        return sum(r.usage.generator.total_tokens + r.usage.selector.total_tokens for r in rs)

    base = all_tokens(groups[baseline]) / len(groups[baseline]) if baseline in groups else None
    prompt_rows = []
    for setting in order:
        rs = groups[setting]
        per_attempt = all_tokens(rs) / len(rs)
        costs = [u.cost_usd for r in rs for u in (r.usage.generator, r.usage.selector)]
        known = [c for c in costs if c is not None]
        prompt_rows.append(
            (
                setting,
                _tokens(sum(r.usage.generator.prompt_tokens for r in rs) / len(rs)),
                _tokens(sum(r.usage.selector.prompt_tokens for r in rs) / len(rs)),
                _tokens(per_attempt),
                _ratio(per_attempt / base if base else None),
                _tokens(all_tokens(rs)),
                f"${sum(known):.4f}" if known else DASH,
            )
        )
    return [
        "## Cost (Table 1)",
        "",
        "Per-attempt averages. As in the paper, tokens here are **output** (completion) "
        "tokens: the generator's across all N candidates, the selector's over all its calls; "
        f"the last column is their sum relative to the baseline's ({DASH} marks no selector).",
        "",
        *_table(
            [
                "Setting",
                "Attempts",
                "Average turns",
                "Generator tokens",
                "Selector tokens",
                "Total (vs base)",
            ],
            output_rows,
        ),
        "",
        "Prompt (input) tokens usually dominate what a run costs, since every turn resends "
        "the whole transcript to all N candidates and to the selector:",
        "",
        *_table(
            [
                "Setting",
                "Generator prompt / attempt",
                "Selector prompt / attempt",
                "All tokens / attempt",
                "All (vs base)",
                "All tokens, setting total",
                "Cost (USD), setting total",
            ],
            prompt_rows,
        ),
        "",
        *_image(plots, "token_cost", "Tokens per attempt"),
    ]


def _outcomes(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    rows = []
    for setting in order:
        shares = metrics.outcome_shares(groups[setting])
        rows.append(
            (setting, str(len(groups[setting])), *(_pct(shares[o]) for o in metrics.OUTCOMES))
        )
    return [
        "## How attempts end (Table 2)",
        "",
        "Share of attempts by ending (Table 5): only an attempt that ended on its own can "
        "pass or be a wrong submission; a context overflow, the time limit or any other "
        "exception (including a verifier that could not run) ends it otherwise.",
        "",
        *_table(["Setting", "Attempts", *(_OUTCOME_HEADERS[o] for o in metrics.OUTCOMES)], rows),
        "",
    ]


def _turns(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], plots: Mapping[str, str]
) -> list[str]:
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
            _cell(task),
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
        *_table(["Setting", "Tasks solved", "Median", "Mean", "Min", "Max"], rows),
        "",
    ]
    if task_rows:
        lines += [
            f"Per task ({DASH}: not solved in that setting):",
            "",
            *_table(["Task", *order], task_rows),
            "",
        ]
    return lines + _image(plots, "turns_to_solve", "Turns to solve")


def _comparison(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    baseline: str,
    resamples: int,
    seed: int,
) -> list[str]:
    lines = [
        "## Against the baseline (paired bootstrap over tasks)",
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
            rows.append((setting, DASH, "no task in common with the baseline", DASH, "0"))
            continue
        p = f"< {1 / resamples:.4g}" if c.p_value == 0 else f"{c.p_value:.4f}"
        rows.append(
            (
                setting,
                _pp(c.difference),
                f"[{_pp(c.ci_low)}, {_pp(c.ci_high)}]",
                p,
                str(c.tasks),
            )
        )
    return [
        *lines,
        f"Mean pass rate of each setting minus `{baseline}`'s, in percentage points, over the "
        f"tasks both ran; {resamples:,} resamples of tasks with replacement (seed {seed}), "
        "two-sided p-value.",
        "",
        *_table(["Setting", "Difference", "95% CI", "p-value", "Tasks"], rows),
        "",
    ]


def _per_task(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    settings: RunSettings | None,
) -> list[str]:
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
        labels = ([_cell(category.get(task) or "")] if category else []) + (
            [_cell(difficulty.get(task) or "")] if difficulty else []
        )
        cells = []
        for setting in order:
            n, c = counts[setting].get(task, (0, 0))
            cells.append(f"{c}/{n}" if n else DASH)
        rows.append((_cell(task), *labels, *cells))
    return [
        "## Per task",
        "",
        "Passing trials / finished trials.",
        "",
        *_table(["Task", *extra, *order], rows, left=1 + len(extra)),
        "",
    ]


def _errors(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    """Attempts that an exception stopped, one row per distinct error (they repeat)."""
    seen: dict[tuple[str, str, str], list[EpisodeResult]] = {}
    for setting in order:
        for r in groups[setting]:
            if r.error:
                seen.setdefault((r.setting, r.outcome, _short(r.error)), []).append(r)
    if not seen:
        return []
    rows = []
    for (setting, outcome, text), rs in list(seen.items())[:_ERRORS_SHOWN]:
        tasks = sorted({r.task for r in rs})
        shown = ", ".join(tasks[:5]) + (f" (+{len(tasks) - 5})" if len(tasks) > 5 else "")
        rows.append((setting, outcome, _cell(shown), _cell(text), str(len(rs))))
    more = len(seen) - len(rows)
    return [
        "## Attempts stopped by an error",
        "",
        *_table(["Setting", "Outcome", "Tasks", "Error", "Attempts"], rows, left=4),
        "",
        *([f"... and {more} more distinct errors (see `episodes.jsonl`).", ""] if more else []),
    ]


# ----------------------------------------------------------------------------- formatting


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], left: int = 1) -> list[str]:
    """A Markdown table: the first `left` columns left-aligned, the (numbers) right."""
    align = [":--" if i < left else "--:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _image(plots: Mapping[str, str], name: str, alt: str) -> list[str]:
    return [f"![{alt}]({plots[name]})", ""] if name in plots else []


def _cell(text: str) -> str:
    # A pipe or newline inside a cell would break the table.
    return text.replace("|", "\\|").replace("\n", " ")


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _pp(share: float) -> str:
    return f"{100 * share:+.1f} pp"


def _ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}{TIMES}"


def _tokens(count: float) -> str:
    """Like the paper: 72K, 1.2M; small counts in full."""
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    if count >= 1e5:
        return f"{count / 1e3:.0f}K"
    if count >= 1e3:
        return f"{count / 1e3:.1f}K"
    return f"{count:.0f}"

"""`turnbon report`: a run folder as a Markdown report with the paper's tables and plots.

Every number comes from `turnbon_graph.bench.stats.metrics` (the same code notebooks use); this
module writes the report and its summary, `sections` arranges the results and
`format` formats them. It never imports LiteLLM or LangGraph, and it writes the
Markdown even when matplotlib (the `plots` extra) is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from turnbon_graph.bench.readers import harbor_jobs, inspect_logs
from turnbon_graph.bench.report import sections as report_sections
from turnbon_graph.bench.report import strategies as report_strategies
from turnbon_graph.bench.report.format import pct, table
from turnbon_graph.bench.report.html import write_html
from turnbon_graph.bench.report.matched import matched_section
from turnbon_graph.bench.report.reference import task_check_section
from turnbon_graph.bench.report.split import HEADROOM_PLOT
from turnbon_graph.bench.running.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    EpisodeResult,
    RunSettings,
    read_episodes,
)
from turnbon_graph.bench.stats import metrics
from turnbon_graph.bench.stats.decomposition import exploration, single_sample
from turnbon_graph.errors import ConfigurationError

REPORT_FILE = "report.md"
REPORT_DIR = "report"


@dataclass(frozen=True)
class Figures:
    """What the report shows as pictures: each plot written, by figure, as its file name
    beside the report (or why none was drawn), and the episode whose tree it draws."""

    files: Mapping[str, str] = field(default_factory=dict)
    note: str | None = None
    tree_file: Path | None = None


def write_report(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    baseline: str = "N=1",
    resamples: int = 10_000,
    seed: int = 0,
    tree: str | None = None,
    match_spend: float | None = None,
) -> Path:
    """Writes `report.md` (and the PNG plots beside it, and `report.html`: all of it in
    one file to share) for a run; returns the Markdown's path.

    The default destination is `run_dir/report/`. A run with no finished episode yet, or
    only some, still gets a report that says so. `tree` names an episode whose search
    tree is drawn (`<setting>/<task>__<trial>`, `report_strategies.find_tree`);
    `match_spend` a spend per episode each strategy's closest setting is compared at
    (`matched`)."""
    run_dir = Path(run_dir)
    settings, results = read_run(run_dir)
    tree_file = report_strategies.find_tree(run_dir, tree) if tree is not None else None
    out = Path(out_dir) if out_dir is not None else run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    order = setting_order(results, settings)

    plot_files: dict[str, str] = {}
    plots_note: str | None = None
    if results:
        from turnbon_graph.bench.report import plots

        if plots.plots_available():
            written = plots.write_plots(results, out, settings=order, baseline=baseline)
            written.update(_strategy_plots(results, order, out, tree_file, resamples, seed))
            plot_files = {name: path.name for name, path in written.items()}
        else:
            plots_note = (
                f"Plots were skipped: matplotlib is not installed. Install it with "
                f"{plots.PLOTS_INSTALL}, and run `turnbon report {run_dir}` again."
            )

    text = render_report(
        run_dir,
        settings,
        results,
        Figures(plot_files, plots_note, tree_file),
        baseline=baseline,
        resamples=resamples,
        seed=seed,
        match_spend=match_spend,
    )
    path = out / REPORT_FILE
    path.write_text(text, encoding="utf-8")
    write_html(path)
    return path


def _strategy_plots(
    results: Sequence[EpisodeResult],
    order: Sequence[str],
    out: Path,
    tree_file: Path | None,
    resamples: int,
    seed: int,
) -> dict[str, Path]:
    """The strategy comparison's figure (when the run compares strategies or budgets)
    and the chosen episode's tree."""
    from turnbon_graph.bench.report import strategy_plots

    written = {}
    if report_strategies.compares_strategies(results):
        groups = metrics.by_setting(results)
        present = [s for s in order if s in groups]
        points, unit = report_strategies.spend_points(present, groups, resamples, seed)
        written[report_strategies.TOKENS_PLOT] = strategy_plots.plot_pass_against_spend(
            points, out / f"{report_strategies.TOKENS_PLOT}.png", unit=unit
        )
        single = single_sample(groups)
        splits = {s: exploration(groups[s], single) for s in present}
        task_points = {s: split.points for s, split in splits.items() if split is not None}
        if any(p.h is not None and p.rho_v is not None for ps in task_points.values() for p in ps):
            written[HEADROOM_PLOT] = strategy_plots.plot_headroom_against_rho(
                task_points, out / f"{HEADROOM_PLOT}.png"
            )
    if tree_file is not None:
        name = f"{tree_file.parent.name}/{tree_file.stem}"
        written[report_strategies.TREE_PLOT] = strategy_plots.plot_tree(
            report_strategies.read_tree(tree_file),
            out / f"{report_strategies.TREE_PLOT}.png",
            title=f"Search tree of {name}",
        )
    return written


def read_run(run_dir: Path) -> tuple[RunSettings | None, list[EpisodeResult]]:
    """A run folder's settings and episodes, a Harbor job folder's (`harbor_jobs`), or
    an Inspect AI log folder's (`inspect_logs`)."""
    if harbor_jobs.is_job_folder(run_dir):
        return harbor_jobs.read_job(run_dir)
    if inspect_logs.is_log_folder(run_dir):
        return inspect_logs.read_logs(run_dir)
    return read_settings(run_dir), read_episodes(run_dir)


def read_settings(run_dir: Path) -> RunSettings | None:
    """The run's settings, None if only episodes exist; an error if it is no run folder."""
    path = run_dir / SETTINGS_FILE
    if not path.exists():
        if (run_dir / EPISODES_FILE).exists():
            return None
        raise ConfigurationError(
            f"{run_dir} is not a run folder (it has no {SETTINGS_FILE} or {EPISODES_FILE}) "
            "nor a Harbor job folder nor an Inspect AI log folder; pass the folder that "
            "`turnbon bench` printed when it started, the one `harbor run` wrote "
            "(jobs/<job-name>), or `inspect eval`'s --log-dir (logs/ by default)"
        )
    try:
        return RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ConfigurationError(
            f"{path} is not a readable run settings file ({exc.error_count()} problem(s), "
            f"first: {exc.errors()[0]['msg']}); was it written by `turnbon bench`?"
        ) from exc


def setting_order(results: Iterable[EpisodeResult], settings: RunSettings | None) -> list[str]:
    """The run's settings strategy by strategy (as it ran them), each by N (baseline
    first), then any others found in the episodes."""
    keys: dict[str, tuple[int, int, str]] = {}
    if isinstance(settings, harbor_jobs.JobSettings):
        # a Harbor job's agents, in its order: no strategy, no baseline of its own
        keys = {label: (at, 0, label) for at, label in enumerate(settings.labels)}
    elif settings is not None:
        specs = settings.specs
        for setting in settings.settings():
            # The N=1 baseline a search run adds is none of its strategies: it goes first.
            at = specs.index(setting.strategy) if setting.strategy in specs else -1
            keys[setting.label] = (at, setting.n, setting.label)
    for result in results:
        keys.setdefault(result.setting, (10**6, result.n, result.setting))
    return sorted(keys, key=lambda s: keys[s])


def one_line_summary(results: Sequence[EpisodeResult], order: Sequence[str] | None = None) -> str:
    """E.g. `N=1: 25.0% pass (3/12) · N=4: 75.0% pass (9/12)`."""
    groups = metrics.by_setting(results)
    parts = []
    for setting in order or setting_order(results, None):
        rs = groups.get(setting, [])
        passed = sum(r.passed for r in rs)
        rate = passed / len(rs) if rs else 0.0
        parts.append(f"{setting}: {pct(rate)} pass ({passed}/{len(rs)})")
    return " · ".join(parts) if parts else "no finished episodes"


def render_report(
    run_dir: Path,
    settings: RunSettings | None,
    results: Sequence[EpisodeResult],
    figures: Figures | None = None,
    *,
    baseline: str = "N=1",
    resamples: int = 10_000,
    seed: int = 0,
    match_spend: float | None = None,
) -> str:
    """The report's Markdown (reads the run's tree files and rollouts, writes nothing);
    `match_spend`: a spend per episode to compare each strategy's closest setting at."""
    order = setting_order(results, settings)
    groups = metrics.by_setting(results)
    figures = figures or Figures()
    plots, plots_note, tree_file = figures.files, figures.note, figures.tree_file
    lines = [f"# Turn-BoN run report: `{run_dir.name}`", ""]
    lines += _summary(run_dir, settings, results, order, baseline)
    if not results:
        lines += [f"**No finished episodes yet.** {_resume(run_dir, settings)}", ""]
        return "\n".join(lines)
    if plots_note:
        lines += [f"> {plots_note}", ""]
    if baseline not in groups and not (settings and settings.agent):
        lines += [
            f"> No `{baseline}` setting in this run: columns relative to the baseline and "
            "the paired comparison are left out (`turnbon report --baseline SETTING` picks "
            "another one).",
            "",
        ]
    present = [s for s in order if s in groups]
    lines += report_sections.pass_rates(present, groups, plots)
    if settings is not None and settings.agent is not None:  # a task set checked
        lines += task_check_section(results, settings.agent)
        lines += report_sections.outcomes(present, groups)
        lines += report_sections.per_task(present, groups, settings)
        return "\n".join(lines)
    if report_strategies.compares_strategies(results):
        matched = (
            matched_section(present, groups, match_spend, resamples, seed)
            if match_spend is not None
            else []
        )
        lines += report_strategies.section(
            run_dir, present, groups, plots, resamples, seed, extra=matched
        )
    lines += report_sections.curves(present, groups, plots)
    lines += report_sections.costs(results, present, groups, baseline, plots)
    lines += report_sections.outcomes(present, groups)
    lines += report_sections.turns(present, groups, plots)
    lines += report_sections.comparison(present, groups, baseline, resamples, seed)
    lines += report_sections.per_task(present, groups, settings)
    lines += report_sections.errors(present, groups)
    lines += report_sections.tamper(present, groups)
    if tree_file is not None:
        lines += report_strategies.tree_section(run_dir, tree_file, results, plots)
    return "\n".join(lines)


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
        ("Model", _models(settings)),
        ("Selector", f"`{settings.selector}`" if settings else "unknown"),
    ]
    if settings is not None and settings.agent is not None:  # no model, no selector
        rows[-2:] = [("Agent", f"`{settings.agent}` (no model)")]
    rows += [
        ("Settings", ", ".join(labels) or "none"),
        ("Tasks", str(len(tasks))),
        ("Trials", str(trials)),
    ]
    job = settings if isinstance(settings, harbor_jobs.JobSettings) else None
    expected = len(tasks) * trials * len(order) if settings else None
    per = len(tasks) * trials
    if job is not None:  # Harbor's own count: every agent runs every task's attempts
        expected = job.total_trials
        per = job.total_trials // max(len(job.labels), 1)
    finished = len(results)
    episodes = f"{finished} of {expected} finished" if expected else str(finished)
    if job is not None and job.complete:
        episodes = f"{finished} of {expected} trials (Harbor finished the job)"
    rows.append(("Episodes", episodes))
    if settings and settings.created:
        rows.append(("Started", settings.created))
    lines = ["## Summary", "", *table(["", ""], rows, left=2), ""]
    if expected and 0 < finished < expected and not (job is not None and job.complete):
        groups = metrics.by_setting(results)
        missing = ", ".join(
            f"{s} {len(groups.get(s, []))}/{per}" for s in order if len(groups.get(s, [])) < per
        )
        lines += [
            f"> **Partial run:** {finished} of {expected} episodes have finished ({missing}). "
            "The numbers below cover only those; pass@k and consistency stop at the fewest "
            f"trials any task has. {_resume(run_dir, settings)}",
            "",
        ]
    return lines


def _models(settings: RunSettings | None) -> str:
    """The summary's model: the run's; a Harbor job's, setting by setting when its
    agents differ (an agent that calls no model, oracle or nop, has none)."""
    if settings is None:
        return "unknown"
    if not isinstance(settings, harbor_jobs.JobSettings):
        return f"`{settings.model}`"
    models = settings.agent_models
    if len(set(models.values())) == 1 and None not in models.values():
        return f"`{settings.model}`"
    return ", ".join(
        f"{label}: `{model}`" if model else f"{label}: no model" for label, model in models.items()
    )


def _resume(run_dir: Path, settings: RunSettings | None) -> str:
    """How the run goes on: a Harbor job in Harbor, a run with `turnbon bench`."""
    if isinstance(settings, harbor_jobs.JobSettings):
        return (
            f"Harbor resumes the job with `{settings.resume_hint(run_dir)}`; then run "
            f"`turnbon report {run_dir}` again."
        )
    return (
        f"Start or resume the run with the same `turnbon bench` arguments and "
        f"`--run {run_dir}`, then run `turnbon report {run_dir}` again."
    )

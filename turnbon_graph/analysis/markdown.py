"""analysis.md, the Markdown of `turnbon analyze`: which behaviours the selector picks
(Figure 4), how long its picks are (Figure 5), what the judge flagged (Table 3) and the
branch rollouts' measures, each table with its plot when matplotlib is installed.
`flagged_table` and `rollout_table` are also what `turnbon judge` and `turnbon rollouts`
print."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from turnbon_graph.analysis.figures import (
    plot_flagged,
    plot_h_vs_rho,
    plot_headroom,
    plot_lengths,
    plot_oracle_realised,
    plot_preference,
)
from turnbon_graph.analysis.judge import (
    VERDICTS_FILE,
    FlaggedShare,
    flagged_shares,
    read_verdicts,
)
from turnbon_graph.analysis.preference import (
    BehaviourPreference,
    LengthComparison,
    behaviour_preference,
    length_comparison,
    markdown_table,
)
from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, RolloutReport, read_reports, summarise
from turnbon_graph.analysis.trajectories import Trajectory, load_trajectories
from turnbon_graph.bench.plots import PLOTS_INSTALL, plots_available
from turnbon_graph.bench.runs import EPISODES_FILE, SETTINGS_FILE, RunSettings
from turnbon_graph.errors import ConfigurationError

_Picks = TypeVar("_Picks", bound=BehaviourPreference | LengthComparison)

FLAGGED_COLUMNS = (
    "rubric",
    "setting",
    "judged",
    "flagged",
    "unknown",
    "share",
    "tasks",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
)
"""Table 3's columns, as named by `FlaggedShare`."""


PREFERENCE_COLUMNS = (
    "setting",
    "behaviour",
    "turns",
    "informative_turns",
    "tasks",
    "picked_share",
    "chance_share",
    "gap",
    "task_gap",
    "ci_low",
    "ci_high",
    "p_value",
)
"""Figure 4's columns, as named by `BehaviourPreference.to_row`."""

LENGTH_COLUMNS = (
    "setting",
    "metric",
    "turns",
    "tasks",
    "picked",
    "unpicked",
    "baseline",
    "vs_unpicked_difference",
    "vs_unpicked_p_value",
    "vs_baseline_difference",
    "vs_baseline_p_value",
)
"""Figure 5's columns, as named by `LengthComparison.to_row`."""


class _Figures:
    """Draws the analyses' PNGs into `out`, beside analysis.md, when matplotlib (the
    `plots` extra) is installed; each `image` is the Markdown that shows one, or nothing."""

    def __init__(self, out: Path | None) -> None:
        self.out = out if out is not None and plots_available() else None
        self.skipped = out is not None and self.out is None

    def image(self, name: str, alt: str, draw: Callable[[], Any]) -> list[str]:
        if self.out is None:
            return []
        try:
            figure = draw()
        except ValueError:  # nothing to draw (e.g. no complete branched turn)
            return []
        # tight: a long title or legend of a narrow figure is kept, not clipped
        figure.savefig(self.out / f"{name}.png", format="png", bbox_inches="tight")
        return [f"![{alt}]({name}.png)"]


def write_analysis(
    run: Path, out: Path | None = None, *, baseline: str, resamples: int, seed: int
) -> Path:
    """Writes `analysis_markdown` to OUT/analysis.md (default RUN/analysis), its plots
    beside it; returns its path."""
    if not any((run / name).is_file() for name in (EPISODES_FILE, VERDICTS_FILE, ROLLOUTS_FILE)):
        raise ConfigurationError(
            f"{run} is not a run folder (it has no {EPISODES_FILE}, {VERDICTS_FILE} or "
            f"{ROLLOUTS_FILE}); pass the folder that `turnbon bench` or `turnbon rollouts` "
            "printed when it started"
        )
    out = out or run / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    text = analysis_markdown(run, out, baseline=baseline, resamples=resamples, seed=seed)
    path = out / "analysis.md"
    path.write_text(text, encoding="utf-8")
    return path


def analysis_markdown(
    run: Path, out: Path | None = None, *, baseline: str, resamples: int, seed: int
) -> str:
    """analysis.md: Figures 4 and 5 as tables, Table 3 and the rollouts when recorded;
    with `out`, their plots are drawn there (when matplotlib is installed)."""
    figures = _Figures(out)
    trajectories = load_trajectories(run)
    parts = [f"# Analysis of {run}", *_run_line(run)]
    if figures.skipped:
        parts.append(
            f"> Plots were skipped: matplotlib is not installed. Install it with "
            f"`{PLOTS_INSTALL}` and run `turnbon analyze {run}` again."
        )
    if trajectories:
        parts += _preference_section(trajectories, figures, resamples=resamples, seed=seed)
        parts += _length_section(
            trajectories, figures, baseline=baseline, resamples=resamples, seed=seed
        )
    else:
        parts.append(
            "No recorded episodes here (`turnbon bench` records them), so no analysis of the "
            "selector's picks (Figures 4 and 5)."
        )
    verdicts = read_verdicts(run)
    if verdicts:
        shares = flagged_shares(verdicts, baseline=baseline, resamples=resamples, seed=seed)
        parts += [
            "## What the judge flagged (Table 3)",
            "The share of attempts the judge (`turnbon judge`, "
            f"{', '.join(sorted({v.model for v in verdicts}))}) answered yes per rubric and "
            "setting.",
            flagged_table(shares, baseline=baseline),
            *figures.image("table3_flagged", "Flagged shares", lambda: plot_flagged(shares)),
        ]
    reports = read_reports(run)
    if reports:
        parts += [
            "## Branch rollouts: exploration and exploitation",
            "From `turnbon rollouts`: at each branched turn every distinct candidate action "
            "was forced and continued to the verifier; its value is its mean pass. Means over "
            "the complete branched turns (every candidate valued): oracle (the best value: is "
            "a good action in the pool?), realised (the selector's pick), mu (a random pick), "
            "h = (realised - mu) / (oracle - mu) where oracle > mu (1: the best pick, 0: no "
            "better than random), rho_v (Spearman of a scoring selector's scores against the "
            "values, pooled).",
            rollout_table(reports),
            *figures.image(
                "rollouts_oracle_realised",
                "Oracle, realised and mu",
                lambda: plot_oracle_realised(reports),
            ),
            *figures.image("rollouts_headroom", "Headroom capture", lambda: plot_headroom(reports)),
            *figures.image("rollouts_h_vs_rho", "h against rho_v", lambda: plot_h_vs_rho(reports)),
        ]
    return "\n\n".join(parts) + "\n"


def _run_line(run: Path) -> list[str]:
    try:
        s = RunSettings.model_validate_json((run / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    settings = ", ".join(f"N={n}" for n in s.n_values)
    return [
        f"Environment {s.environment}, model {s.model}, selector {s.selector}; {settings}; "
        f"{len(s.tasks)} task(s) x {s.trials} trial(s)."
    ]


def _preference_section(
    trajectories: Sequence[Trajectory], figures: _Figures, *, resamples: int, seed: int
) -> list[str]:
    return _picks_section(
        "## Which behaviours the selector picks (Figure 4)",
        "Per setting with N>1 and behaviour: picked_share is the share of turns whose "
        "executed pick shows the behaviour, chance_share the share expected from a uniform "
        "random pick among the turn's candidates. task_gap (each task counted once) is "
        f"tested by a paired bootstrap over tasks ({resamples} resamples, seed {seed}): "
        "ci_low..ci_high is its 95% interval, p_value two-sided. informative_turns: turns "
        "whose candidates disagree on the behaviour (the others add nothing to the gap).",
        lambda: behaviour_preference(trajectories, resamples=resamples, seed=seed),
        PREFERENCE_COLUMNS,
        figures,
        ("figure4_preference", "Picked vs chance per behaviour", plot_preference),
    )


def _length_section(
    trajectories: Sequence[Trajectory],
    figures: _Figures,
    *,
    baseline: str,
    resamples: int,
    seed: int,
) -> list[str]:
    return _picks_section(
        "## How long the picked actions are (Figure 5)",
        "Per turn, the reasoning tokens and shell-command characters of the picked "
        "candidate, the mean of the turn's unpicked candidates, and the executed action of "
        f"the baseline ({baseline}). vs_unpicked: picked minus unpicked within each turn; "
        "vs_baseline: picked minus baseline per task; both bootstrapped over tasks.",
        lambda: length_comparison(trajectories, baseline=baseline, resamples=resamples, seed=seed),
        LENGTH_COLUMNS,
        figures,
        ("figure5_lengths", "Action lengths", plot_lengths),
    )


def _picks_section(
    title: str,
    explanation: str,
    analyse: Callable[[], Sequence[_Picks]],
    columns: Sequence[str],
    figures: _Figures,
    figure: tuple[str, str, Callable[[Sequence[_Picks]], Any]],
) -> list[str]:
    """A section on the selector's picks: their table, what was left out, the plot
    (`figure`: its name, alt text and drawing); or why there is none."""
    try:
        results: Sequence[_Picks] = analyse()
    except ValueError as exc:
        return [title, f"Not available: {exc}."]
    rows = [{c: r.to_row()[c] for c in columns} for r in results]
    name, alt, plot = figure
    image = figures.image(name, alt, lambda: plot(results))
    return [title, explanation, markdown_table(rows), _left_out(results), *image]


def _left_out(results: Sequence[BehaviourPreference | LengthComparison]) -> str:
    """Which turns the analyses left out, per setting (the same for every row of one)."""
    seen: dict[str, tuple[int, int]] = {}
    for r in results:
        seen.setdefault(r.setting, (r.synthesized_turns, r.rule_turns))
    parts = [
        f"{setting}: {synthesized} turn(s) whose action the selector wrote, {rule} picked by "
        "a rule (fallback or early commit)"
        for setting, (synthesized, rule) in seen.items()
    ]
    return "Left out: " + "; ".join(parts) + "."


def rollout_table(reports: Sequence[RolloutReport]) -> str:
    """The rollouts' measures as Markdown: one row per setting and selector."""
    groups: dict[tuple[int, str], list[RolloutReport]] = {}
    for report in reports:
        groups.setdefault((report.n, report.selector), []).append(report)
    rows = []
    for (n, selector), group in sorted(groups.items()):
        s = summarise(t for r in group for t in r.turns)
        rows.append(
            {
                "setting": f"N={n}",
                "selector": selector,
                "episodes": len(group),
                "passed": sum(r.outcome == "pass" for r in group),
                "branched_turns": s.turns,
                "complete_turns": s.complete_turns,
                "oracle": s.mean_oracle,
                "realised": s.mean_realised,
                "mu": s.mean_mu,
                "h": s.mean_h,
                "h_turns": s.h_turns,
                "rho_v": s.rho_v,
                "rollouts": s.rollouts,
                "skipped_rollouts": s.skipped_rollouts,
                "tokens": s.tokens,
            }
        )
    return markdown_table(rows)


def flagged_table(shares: Sequence[FlaggedShare], *, baseline: str) -> str:
    """Table 3 as Markdown, from `flagged_shares`: the share flagged per rubric and setting."""
    if not shares:
        return "No verdicts."
    rows = [{c: getattr(s, c) for c in FLAGGED_COLUMNS} for s in shares]
    passed = sorted({s.rubric for s in shares if s.applies_to == "passed"})
    note = (
        f"share = flagged / judged (unknown verdicts left out); difference, its 95% interval "
        f"and p_value: per task, the share here minus in {baseline}, bootstrapped over the "
        "tasks judged in both."
    )
    if passed:
        note += f" {', '.join(passed)}: judged on passing attempts only."
    return f"{markdown_table(rows)}\n\n{note}"

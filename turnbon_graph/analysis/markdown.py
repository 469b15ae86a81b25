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
    BEHAVIOUR_TITLES,
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
)
from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, RolloutReport, read_reports, summarise
from turnbon_graph.analysis.trajectories import Trajectory, load_trajectories
from turnbon_graph.bench.report.format import (
    DASH,
    cell,
    interval,
    number,
    p_value,
    pct,
    pp,
    table,
    tokens,
)
from turnbon_graph.bench.report.html import write_html
from turnbon_graph.bench.report.plots import PLOTS_INSTALL, plots_available
from turnbon_graph.bench.running.runs import EPISODES_FILE, SETTINGS_FILE, RunSettings
from turnbon_graph.errors import ConfigurationError

_Picks = TypeVar("_Picks", bound=BehaviourPreference | LengthComparison)


def preference_rows(results: Sequence[BehaviourPreference]) -> _Table:
    """Figure 4's table: shares as percentages, the gap per task in points with its
    interval and p-value."""
    header = ["Setting", "Behaviour", "Turns", "Informative turns", "Tasks"]
    header += ["Picked", "Chance", "Gap per task", "95% CI", "p-value"]
    rows: list[tuple[str, ...]] = [
        (
            r.setting,
            BEHAVIOUR_TITLES.get(r.behaviour, r.behaviour),
            str(r.turns),
            str(r.informative_turns),
            str(r.tasks),
            pct(r.picked_share),
            pct(r.chance_share),
            pp(r.task_gap),
            interval(r.ci_low, r.ci_high),
            p_value(r.p_value),
        )
        for r in results
    ]
    return header, rows, 2


def length_rows(results: Sequence[LengthComparison]) -> _Table:
    """Figure 5's table: per-turn means with one decimal, the differences signed."""
    header = ["Setting", "Measure", "Turns", "Tasks", "Picked", "Unpicked"]
    header += ["Baseline", "Picked - unpicked", "p-value", "Picked - baseline", "p-value"]
    rows: list[tuple[str, ...]] = []
    for r in results:
        tests = []
        for test in (r.vs_unpicked, r.vs_baseline):
            tests += [
                number(test.difference if test else None, signed=True),
                p_value(test.p_value if test else None),
            ]
        measure = LENGTH_TITLES.get(r.metric, r.metric)
        counts = (str(r.turns), str(r.tasks))
        values = (number(r.picked), number(r.unpicked), number(r.baseline))
        rows.append((r.setting, measure, *counts, *values, *tests))
    return header, rows, 2


_Table = tuple[list[str], list[tuple[str, ...]], int]
"""A table's header, rows and how many columns (from the left) hold text."""

LENGTH_TITLES = {"reasoning_tokens": "Reasoning tokens", "command_chars": "Command characters"}


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
    beside it and all of it as one file, OUT/report.html; returns the Markdown's path."""
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
    write_html(path)
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
            f"{PLOTS_INSTALL}, and run `turnbon analyze {run}` again."
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
            *figures.image(
                "table3_flagged",
                "Table 3 as a dot chart: flagged shares",
                lambda: plot_flagged(shares),
            ),
        ]
    reports = read_reports(run)
    if reports:
        parts += [
            "## Branch rollouts: exploration and exploitation (the companion study's Figures 2, 3)",
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
                "Study Figure 2: oracle, realised and mu",
                lambda: plot_oracle_realised(reports),
            ),
            *figures.image(
                "rollouts_headroom", "Headroom capture h per turn", lambda: plot_headroom(reports)
            ),
            *figures.image(
                "rollouts_h_vs_rho",
                "Study Figure 3 (left): h against rho_v",
                lambda: plot_h_vs_rho(reports),
            ),
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
        "Per setting with N>1 and behaviour: Picked is the share of turns whose executed "
        "pick shows the behaviour (the solid line), Chance the share expected from a "
        "uniform random pick among the turn's candidates (dashed). The gap per task (picked "
        "minus chance, each task counted once, in percentage points) is tested over tasks: "
        f"its 95% bootstrap interval ({resamples:,} resamples, seed {seed}) and the "
        "two-sided p-value of the exact sign-flip test. Informative turns: turns whose "
        "candidates disagree on the behaviour (the others add nothing to the gap).",
        lambda: behaviour_preference(trajectories, resamples=resamples, seed=seed),
        preference_rows,
        figures,
        ("figure4_preference", "Figure 4: picked vs chance per behaviour", plot_preference),
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
        f"the baseline ({baseline}), means per turn. Picked - unpicked: within each turn; "
        "picked - baseline: per task; both with a bootstrap interval over tasks and the "
        "two-sided p-value of the exact sign-flip test).",
        lambda: length_comparison(trajectories, baseline=baseline, resamples=resamples, seed=seed),
        length_rows,
        figures,
        ("figure5_lengths", "Figure 5: action lengths", plot_lengths),
    )


def _picks_section(
    title: str,
    explanation: str,
    analyse: Callable[[], Sequence[_Picks]],
    tabulate: Callable[[Sequence[_Picks]], _Table],
    figures: _Figures,
    figure: tuple[str, str, Callable[[Sequence[_Picks]], Any]],
) -> list[str]:
    """A section on the selector's picks: their table, what was left out, the plot
    (`figure`: its name, alt text and drawing); or why there is none."""
    try:
        results: Sequence[_Picks] = analyse()
    except ValueError as exc:
        return [title, f"Not available: {exc}."]
    header, rows, left = tabulate(results)
    name, alt, plot = figure
    image = figures.image(name, alt, lambda: plot(results))
    return [title, explanation, "\n".join(table(header, rows, left)), _left_out(results), *image]


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
            (
                f"N={n}",
                cell(selector),
                str(len(group)),
                str(sum(r.outcome == "pass" for r in group)),
                f"{s.complete_turns} of {s.turns}",
                pct(s.mean_oracle),
                pct(s.mean_realised),
                pct(s.mean_mu),
                number(s.mean_h, 2),
                f"{number(s.rho_v, 2)}",
                f"{s.rollouts:,}"
                + (f" ({s.skipped_rollouts} skipped)" if s.skipped_rollouts else ""),
                tokens(s.tokens),
            )
        )
    header = ["Setting", "Selector", "Episodes", "Passed", "Complete turns", "Oracle"]
    header += ["Realised", "mu", "h", "rho_v", "Rollouts", "Tokens"]
    return "\n".join(table(header, rows, left=2))


def flagged_table(shares: Sequence[FlaggedShare], *, baseline: str) -> str:
    """Table 3 as Markdown, from `flagged_shares`: the share flagged per rubric and setting."""
    if not shares:
        return "No verdicts."
    rows = [
        (
            cell(s.title),
            s.setting,
            str(s.judged),
            str(s.flagged),
            str(s.unknown),
            pct(s.share),
            str(s.tasks) if s.setting != baseline else DASH,
            pp(s.difference),
            interval(s.ci_low, s.ci_high),
            p_value(s.p_value),
        )
        for s in shares
    ]
    header = ["Rubric", "Setting", "Judged", "Flagged", "Unknown", "Share flagged", "Tasks"]
    header += [f"Δ vs {baseline}", "95% CI", "p-value"]
    passed = sorted({s.rubric for s in shares if s.applies_to == "passed"})
    note = (
        f"Share flagged = flagged / judged (unknown verdicts left out); Δ, its 95% interval "
        f"and p-value: per task, the share here minus in {baseline}, over the tasks judged "
        "in both (a bootstrap interval, the sign-flip test's p-value; lower is better)."
    )
    if passed:
        titles = {s.rubric: s.title for s in shares}
        note += f" {', '.join(titles[r] for r in passed)}: judged on passing attempts only."
    return "\n".join(table(header, rows, left=2)) + f"\n\n{note}"

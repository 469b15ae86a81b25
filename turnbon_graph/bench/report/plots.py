"""PNG plots of a run, as in the paper's Figures 2 and 3 and Table 1.

matplotlib comes with the `plots` extra (`PLOTS_INSTALL` says how): it is imported
inside the functions, and figures are drawn on an Agg canvas through the object API
(never pyplot), so plotting changes no global backend and works in threads and notebooks.
Each function takes plain numbers, so notebooks can plot their own slices.
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from turnbon_graph._extras import install_hint
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats import metrics

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

PLOTS_INSTALL = install_hint("plots", markdown=True)
"""How to install what the plots need, in Markdown (each command in backticks)."""

BASELINE_COLOR = "#4d4d4d"
TIMES = "\u00d7"
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)

PLOT_FILES = {
    "pass_rate": "pass_rate.png",
    "pass_at_k": "pass_at_k.png",
    "consistency": "consistency.png",
    "turns_to_solve": "turns_to_solve.png",
    "token_cost": "token_cost.png",
}


def plots_available() -> bool:
    """Whether matplotlib (the `plots` extra) is installed."""
    return importlib.util.find_spec("matplotlib") is not None


def setting_colors(settings: Sequence[str], baseline: str = "N=1") -> dict[str, str]:
    """One colour per setting, the same in every plot: grey for the baseline."""
    others = [s for s in settings if s != baseline]
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(others)}
    if baseline in settings:
        colors[baseline] = BASELINE_COLOR
    return colors


def legend_color(settings: Sequence[str], colors: Mapping[str, str]) -> str:
    """The fill of a legend swatch that stands for bars of every setting (solid vs
    hatched): the colour of the last setting drawn that is not the baseline's grey, so
    the swatch looks like the bars it explains."""
    fills = [colors.get(s, BASELINE_COLOR) for s in settings]
    coloured = [f for f in fills if f != BASELINE_COLOR]
    return (coloured or fills or [BASELINE_COLOR])[-1]


@dataclass(frozen=True)
class TokenBar:
    """Per-attempt token averages of one setting, split between generator and selector."""

    setting: str
    generator_output: float
    selector_output: float
    generator_prompt: float
    selector_prompt: float
    vs_baseline: float | None = None


def write_plots(
    results: Sequence[EpisodeResult],
    out_dir: Path,
    *,
    settings: Sequence[str],
    baseline: str = "N=1",
) -> dict[str, Path]:
    """Every plot of a run into `out_dir`; returns the files by plot name.

    Raises ModuleNotFoundError when matplotlib is missing (see `plots_available`)."""
    groups = metrics.by_setting(results)
    order = [s for s in settings if s in groups]
    colors = setting_colors(order, baseline)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / file for name, file in PLOT_FILES.items()}

    plot_pass_rates(
        {s: trial_pass_rates(groups[s]) for s in order},
        paths["pass_rate"],
        colors=colors,
    )
    curves = (
        (
            "pass_at_k",
            metrics.pass_at_k_curve,
            "Figure 2(b): pass@k, solved in at least one of k trials",
            "pass@k (share of tasks)",
        ),
        (
            "consistency",
            metrics.consistency_curve,
            "Figure 3(b): consistency, solved in all k trials",
            "solved in all k (share of tasks)",
        ),
    )
    for name, curve, title, ylabel in curves:
        by_setting = {s: curve(groups[s]) for s in order}
        plot_curves(by_setting, paths[name], title=title, ylabel=ylabel, colors=colors)
    plot_turns_to_solve(
        {s: sorted(metrics.turns_to_solve(groups[s]).values()) for s in order},
        paths["turns_to_solve"],
        colors=colors,
    )
    rows = {row.setting: row for row in metrics.cost_table(results, baseline)}
    plot_token_costs(
        [token_bar(s, groups[s], rows[s].total_vs_baseline) for s in order],
        paths["token_cost"],
        colors=colors,
    )
    return paths


def trial_pass_rates(results: Sequence[EpisodeResult]) -> list[float]:
    """The pass rate of each trial (over the tasks that trial finished)."""
    trials: dict[int, list[bool]] = {}
    for result in results:
        trials.setdefault(result.trial, []).append(result.passed)
    return [sum(p) / len(p) for _, p in sorted(trials.items())]


def token_bar(setting: str, results: Sequence[EpisodeResult], vs: float | None) -> TokenBar:
    """One setting's bar of the token plot: per-attempt output and prompt tokens, generator and
    selector apart."""
    count = len(results) or 1
    return TokenBar(
        setting=setting,
        generator_output=sum(r.usage.generator.completion_tokens for r in results) / count,
        selector_output=sum(r.usage.selector.completion_tokens for r in results) / count,
        generator_prompt=sum(r.usage.generator.prompt_tokens for r in results) / count,
        selector_prompt=sum(r.usage.selector.prompt_tokens for r in results) / count,
        vs_baseline=vs,
    )


def plot_pass_rates(
    rates: Mapping[str, Sequence[float]], path: Path, *, colors: Mapping[str, str]
) -> Path:
    """Figure 2(a): mean pass rate per setting, each trial's rate as a dot."""
    figure, (ax,) = new_figure()
    labels = list(rates)
    for x, setting in enumerate(labels):
        trials = rates[setting]
        mean = sum(trials) / len(trials) if trials else 0.0
        ax.bar(x, mean, width=0.6, color=colors.get(setting), alpha=0.85, zorder=2)
        ax.annotate(
            f"{mean:.1%}",
            (x, max([mean, *trials])),  # above the dots, which would hide it
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=9,
        )
        jitter = jitter_offsets(len(trials), 0.12, seed=x)
        ax.scatter([x + j for j in jitter], trials, color="black", s=14, zorder=3, label=None)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.08)
    percent_axis(ax)
    ax.set_xlabel("setting")
    ax.set_ylabel("mean pass rate (pass@1)")
    ax.set_title("Figure 2(a): mean pass rate over trials (dots: single trials)")
    return save_figure(figure, path)


def plot_curves(
    curves: Mapping[str, Mapping[int, float]],
    path: Path,
    *,
    title: str,
    ylabel: str,
    colors: Mapping[str, str],
) -> Path:
    """Figure 2(b) / 3(b): one line per setting over k."""
    figure, (ax,) = new_figure()
    ks: set[int] = set()
    for setting, points in curves.items():
        if not points:
            continue
        xs = sorted(points)
        ks.update(xs)
        ax.plot(
            xs,
            [points[k] for k in xs],
            marker="o",
            linewidth=2,
            color=colors.get(setting),
            label=setting,
        )
    if ks:
        ax.set_xticks(sorted(ks))
        # beside the axes: inside, it would sit on a line that reaches 100% at k=1
        ax.legend(title="setting", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_ylim(-0.02, 1.02)
    percent_axis(ax)
    ax.set_xlabel("k (trials)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return save_figure(figure, path)


def plot_turns_to_solve(
    turns: Mapping[str, Sequence[float]], path: Path, *, colors: Mapping[str, str]
) -> Path:
    """Figure 3(a): turns a solved task took (mean over its passing trials), per setting."""
    from matplotlib.ticker import MaxNLocator

    figure, (ax,) = new_figure()
    labels = list(turns)
    filled = [(x, turns[s]) for x, s in enumerate(labels) if turns[s]]
    if filled:
        boxes = ax.boxplot(
            [list(values) for _, values in filled],
            positions=[x for x, _ in filled],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            medianprops={"color": "black", "linewidth": 1.5},
        )
        for (x, _), box in zip(filled, boxes["boxes"], strict=True):
            box.set_facecolor(colors.get(labels[x], BASELINE_COLOR))
            box.set_alpha(0.35)
        for x, values in filled:
            jitter = jitter_offsets(len(values), 0.15, seed=x)
            ax.scatter(
                [x + j for j in jitter],
                values,
                color=colors.get(labels[x]),
                s=16,
                zorder=3,
                edgecolors="white",
                linewidths=0.5,
            )
    ax.set_xticks(range(len(labels)), [f"{s}\n({len(turns[s])} solved)" for s in labels])
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("setting")
    ax.set_ylabel("turns to solve (mean over passing trials)")
    ax.set_title("Figure 3(a): turns taken to solve a task")
    return save_figure(figure, path)


def plot_token_costs(bars: Sequence[TokenBar], path: Path, *, colors: Mapping[str, str]) -> Path:
    """`token_cost_figure`, saved to `path`."""
    return save_figure(token_cost_figure(bars, colors=colors), path)


def token_cost_figure(bars: Sequence[TokenBar], *, colors: Mapping[str, str]) -> Figure:
    """Table 1 as bars: output tokens per attempt (left, the paper's measure) and prompt
    tokens per attempt (right, what usually dominates the bill), generator below selector;
    the legend's swatches in the bars' own colour."""
    from matplotlib.patches import Patch

    figure, (left, right) = new_figure(columns=2)
    xs = range(len(bars))
    labels = [bar.setting for bar in bars]
    for ax, generator, selector, title in (
        (left, [b.generator_output for b in bars], [b.selector_output for b in bars], "Output"),
        (right, [b.generator_prompt for b in bars], [b.selector_prompt for b in bars], "Prompt"),
    ):
        fills = [colors.get(label, BASELINE_COLOR) for label in labels]
        ax.bar(xs, generator, width=0.6, color=fills, zorder=2)
        ax.bar(
            xs,
            selector,
            bottom=generator,
            width=0.6,
            color=fills,
            alpha=0.4,
            hatch="//",
            edgecolor="white",
            zorder=2,
        )
        ax.set_xticks(list(xs), labels)
        ax.set_xlabel("setting")
        ax.set_ylabel(f"{title.lower()} tokens per attempt")
        ax.set_title(f"{title} tokens")
        ax.yaxis.set_major_formatter(token_formatter())
        ax.margins(y=0.12)
    for x, bar in enumerate(bars):
        if bar.vs_baseline is not None:
            left.annotate(
                f"{bar.vs_baseline:.1f}{TIMES}",
                (x, bar.generator_output + bar.selector_output),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=9,
            )
    swatch = legend_color(labels, colors)
    left.legend(
        handles=[
            Patch(facecolor=swatch, label="generator (all N candidates)"),
            Patch(facecolor=swatch, alpha=0.4, hatch="//", edgecolor="white", label="selector"),
        ],
        frameon=False,
        loc="upper left",
    )
    figure.suptitle(f"Table 1: tokens per attempt ({TIMES}: output vs the baseline's)")
    return figure


# ----------------------------------------------------------------------------- helpers


def new_figure(columns: int = 1) -> tuple[Figure, list[Axes]]:
    """A figure of `columns` side-by-side axes, drawn on Agg whatever the backend, in the
    reports' style."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4 * columns, 4.2), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: rendering stays on Agg whatever the backend
    axes = figure.subplots(1, columns, squeeze=False)[0]
    for ax in axes:
        ax.grid(axis="y", alpha=0.3, zorder=0)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, list(axes)


def percent_axis(ax: Axes) -> None:
    """Labels the y axis as percentages of 1."""
    from matplotlib.ticker import PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))


def token_formatter() -> FuncFormatter:
    """Tick labels for token counts: 72K, 1.2M."""
    from matplotlib.ticker import FuncFormatter

    def short(value: float, _: int | None) -> str:
        if abs(value) >= 1e6:
            return f"{value / 1e6:g}M"
        if abs(value) >= 1e3:
            return f"{value / 1e3:g}K"
        return f"{value:g}"

    return FuncFormatter(short)


def jitter_offsets(count: int, width: float, seed: int) -> list[float]:
    """Seeded horizontal offsets, so that points of equal value do not hide each other."""
    # Seeded so the same run always draws the same picture.
    rng = random.Random(seed)
    return [rng.uniform(-width, width) for _ in range(count)] if count > 1 else [0.0] * count


def save_figure(figure: Figure, path: Path) -> Path:
    """Writes `figure` to `path` as a PNG (its folder made as needed); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path

"""The report's comparison of search strategies at matched compute (the agent-level
counterpart of Table 4 of "Test-Time Scaling in the Wild"), and one episode's search
tree drawn for `turnbon report --tree EPISODE`.

Per setting: the mean pass rate with a bootstrap interval over tasks
(`metrics.bootstrap_differences` over per-task pass rates), the mean tokens an episode
spent (`metrics.episode_tokens`: generator, selector, value and rollout calls together,
as Table 1 counts them), the diversity of the search (per turn, the distinct actions
among the live trajectories, from the tree files: a search that collapses keeps W copies
of one action), and the exploration/exploitation split from the verified leaves (oracle,
realised, h, rho_v: `split`); then what each setting spent (`spend`).
Reads files; never imports LiteLLM or LangGraph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnbon_graph.bench.report.format import (
    DASH,
    TIMES,
    cell,
    image,
    number,
    pct,
    table,
    tokens,
)
from turnbon_graph.bench.report.pairs import pairs_section
from turnbon_graph.bench.report.spend import spend_section
from turnbon_graph.bench.report.split import split_cells, split_section
from turnbon_graph.bench.report.strategy_plots import SpendPoint
from turnbon_graph.bench.running.runs import TREES_DIR, EpisodeResult, read_lines, tree_path
from turnbon_graph.bench.spend import spent
from turnbon_graph.bench.stats import metrics
from turnbon_graph.bench.stats.decomposition import exploration, single_sample
from turnbon_graph.bench.stats.metrics import episode_tokens
from turnbon_graph.bench.strategies.names import BudgetUnit
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.tree import TreeNode
from turnbon_graph.errors import ConfigurationError

SECTION = "Strategies at matched compute"
TOKENS_PLOT = "strategies_tokens"
TREE_PLOT = "tree"
LIVE_FATES = ("kept", "held", "chosen")
"""The fates of a node whose trajectory went on past its turn's cut (or ended there)."""
TREES_LISTED = 30
"""Valid episodes named when --tree names none of them; the rest are counted."""


def strategy_of(result: EpisodeResult) -> StrategySpec:
    """The row's strategy (rows written before strategies were recorded: plain bon)."""
    return result.strategy or StrategySpec()


def compares_strategies(results: Sequence[EpisodeResult]) -> bool:
    """Whether the run has more than one strategy or token budget, or a search that
    recorded its spend and leaves: the section's cue."""
    return len({strategy_of(r) for r in results}) > 1 or any(r.search for r in results)


@dataclass(frozen=True)
class Diversity:
    """Per turn of a setting's trees: the mean distinct actions and live trajectories."""

    distinct: dict[int, float]
    live: dict[int, float]
    episodes: int
    """Episodes with a tree file."""

    def mean(self) -> tuple[float, float] | None:
        """Mean distinct actions and mean live trajectories over every turn."""
        if not self.distinct:
            return None
        turns = list(self.distinct)
        return (
            sum(self.distinct[t] for t in turns) / len(turns),
            sum(self.live[t] for t in turns) / len(turns),
        )


def read_tree(path: Path) -> list[TreeNode]:
    """A tree file's nodes (a torn last line, from a kill, is skipped)."""
    return read_lines(path, TreeNode)


def turn_diversity(nodes: Sequence[TreeNode]) -> dict[int, tuple[int, int]]:
    """Per turn (from 1): (distinct actions, live trajectories) among the nodes whose
    trajectory survived the turn's cut or ended at it; a particle drawn k times counts k."""
    per_turn: dict[int, tuple[set[str], int]] = {}
    for node in nodes:
        if node.turn < 1 or node.fate not in LIVE_FATES:
            continue
        actions, live = per_turn.get(node.turn, (set(), 0))
        actions.add(node.action)
        per_turn[node.turn] = (actions, live + (node.copies or 1))
    return {turn: (len(actions), live) for turn, (actions, live) in sorted(per_turn.items())}


def diversity(run_dir: Path, results: Sequence[EpisodeResult]) -> Diversity:
    """A setting's diversity per turn, averaged over its episodes that have a tree."""
    sums: dict[int, list[float]] = {}
    episodes = 0
    for result in results:
        path = tree_path(run_dir, result.setting, result.task, result.trial)
        if not path.is_file():
            continue
        episodes += 1
        for turn, (distinct, live) in turn_diversity(read_tree(path)).items():
            total = sums.setdefault(turn, [0.0, 0.0, 0])
            total[0] += distinct
            total[1] += live
            total[2] += 1
    return Diversity(
        distinct={t: d / k for t, (d, _, k) in sums.items()},
        live={t: live / k for t, (_, live, k) in sums.items()},
        episodes=episodes,
    )


def pass_interval(
    results: Sequence[EpisodeResult], resamples: int, seed: int
) -> tuple[float, float, float]:
    """The mean pass rate over tasks and its 95% bootstrap interval (tasks resampled)."""
    rates = [c / n for n, c in metrics.per_task(results).values()]
    boot = metrics.bootstrap_differences(rates, resamples=resamples, seed=seed)
    return boot.difference, boot.ci_low, boot.ci_high


def spend_interval(
    results: Sequence[EpisodeResult], unit: BudgetUnit, resamples: int, seed: int
) -> tuple[float, float, float]:
    """The mean spend per episode (each task its own mean first, as the pass rate is
    taken) and its 95% bootstrap interval, tasks resampled. The interval always holds the
    mean: a percentile interval of a very skewed spend can miss it, and the point then
    sits at the interval's end instead of outside it."""
    by_task: dict[str, list[float]] = {}
    for result in results:
        by_task.setdefault(result.task, []).append(spent(result, unit))
    means = [sum(amounts) / len(amounts) for amounts in by_task.values()]
    boot = metrics.bootstrap_differences(means, resamples=resamples, seed=seed)
    mean = boot.difference
    return mean, min(boot.ci_low, mean), max(boot.ci_high, mean)


def line_label(spec: StrategySpec, n: int) -> str:
    """A strategy at N whatever its budget: a line of the tokens figure."""
    unbounded = spec.model_copy(update={"token_budget": None})
    return unbounded.label(n) if unbounded.name != "bon" else f"bon N={n}"


def spend_unit(specs: Iterable[StrategySpec]) -> BudgetUnit:
    """What spend is counted in across settings: the budgets' unit when they all count
    one, else tokens."""
    units = {spec.budget_unit for spec in specs if spec.token_budget is not None}
    return units.pop() if len(units) == 1 else "tokens"


def spend_points(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], resamples: int, seed: int
) -> tuple[list[SpendPoint], BudgetUnit]:
    """Each setting as a point of the pass-rate-against-spend figure, and the figure's
    unit: the budgets' when they all count one, else tokens."""
    specs = {setting: strategy_of(groups[setting][0]) for setting in order}
    unit = spend_unit(specs.values())
    points = []
    for setting in order:
        rs, spec = groups[setting], specs[setting]
        rate, low, high = pass_interval(rs, resamples, seed)
        mean, spent_low, spent_high = spend_interval(rs, unit, resamples, seed)
        points.append(
            SpendPoint(
                line=line_label(spec, rs[0].n),
                spent=mean,
                spent_low=spent_low,
                spent_high=spent_high,
                rate=rate,
                rate_low=low,
                rate_high=high,
                budget=spec.token_budget if spec.budget_unit == unit else None,
            )
        )
    return points, unit


def rollout_summaries(run_dir: Path) -> dict[int, Any]:
    """`turnbon rollouts`' aggregates by N, when it wrote into this run folder."""
    from turnbon_graph.analysis.rollouts.models import ROLLOUTS_FILE, read_reports, summarise

    if not (run_dir / ROLLOUTS_FILE).is_file():
        return {}
    by_n: dict[int, list[Any]] = {}
    for report in read_reports(run_dir):
        by_n.setdefault(report.n, []).extend(report.turns)
    return {n: summarise(turns) for n, turns in by_n.items()}


def section(
    run_dir: Path,
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    plots: Mapping[str, str],
    resamples: int,
    seed: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """The "Strategies at matched compute" section; `extra` lines follow its pairs (the
    comparison at a matched spend: `matched`)."""
    rollouts = rollout_summaries(run_dir)
    rows, per_turn = [], {}
    single = single_sample(groups)
    for setting in order:
        rs = groups[setting]
        spec = strategy_of(rs[0])
        rate, low, high = pass_interval(rs, resamples, seed)
        spread = diversity(run_dir, rs)
        if spread.distinct:
            per_turn[setting] = spread
        mean = spread.mean()
        measured = split_cells(exploration(rs, single))
        rows.append(
            (
                setting,
                spec.name,
                spec.budget_text or DASH,
                str(len(rs)),
                pct(rate),
                f"[{pct(low)}, {pct(high)}]",
                tokens(sum(episode_tokens(r) for r in rs) / len(rs)),
                f"{mean[0]:.2f} / {mean[1]:.2f}" if mean else DASH,
                *measured,
            )
        )
    lines = [
        f"## {SECTION}",
        "",
        "Each strategy and token budget of the run side by side, as Table 4 of "
        '"Test-Time Scaling in the Wild" at the level of agent turns. Pass rate: the mean '
        "pass rate over tasks, with a 95% bootstrap interval "
        f"({resamples:,} resamples of tasks, seed {seed}). Tokens: prompt plus completion "
        "tokens of every generator, selector, value and rollout call, per episode, as "
        "Table 1 counts them (what `--token-budget` bounds unless `--budget-unit` says "
        "otherwise). Distinct / live: per turn, the distinct actions among the "
        "trajectories that survived the turn's cut (a particle drawn twice counts twice), "
        "averaged over turns and episodes; distinct below live is a search that "
        f"collapsed onto the same action ({DASH}: no tree file, plain bon keeps one "
        "trajectory). Oracle, realised, h and rho_v: the exploration/exploitation split "
        "from every finished trajectory, each verified (below).",
        "",
        *table(
            [
                "Setting",
                "Strategy",
                "Budget",
                "Episodes",
                "Pass rate",
                "95% CI",
                "Tokens / episode",
                "Distinct / live",
                "Oracle",
                "Realised",
                "h",
                "rho_v",
            ],
            rows,
            left=2,
        ),
        "",
        *image(
            plots,
            TOKENS_PLOT,
            "Pass rate against realised spend per episode, one line per strategy, with "
            "95% intervals and the budgets' caps",
        ),
    ]
    oracles = [s for s in order if strategy_of(groups[s][0]).oracle]
    if oracles:
        lines += [
            f"> **An oracle, not a strategy:** {', '.join(f'`{s}`' for s in oracles)} "
            "scored every partial trajectory by the task's own tests (`--value oracle`), "
            "so the verifier guided the search. Their pass rates bound what a value "
            "function could reach; they leak the verifier and are no strategy's result.",
            "",
        ]
    if per_turn:
        turns = sorted({t for d in per_turn.values() for t in d.distinct})
        lines += [
            "Diversity per turn: distinct actions / live trajectories, averaged over the "
            f"episodes that reached the turn ({DASH}: none did).",
            "",
            *table(
                ["Setting", "Trees", *(f"turn {t}" for t in turns)],
                [
                    (
                        setting,
                        str(d.episodes),
                        *(
                            f"{d.distinct[t]:.2f} / {d.live[t]:.2f}" if t in d.distinct else DASH
                            for t in turns
                        ),
                    )
                    for setting, d in per_turn.items()
                ],
            ),
            "",
        ]
    return [
        *lines,
        *pairs_section(order, groups, resamples, seed),
        *extra,
        *split_section(order, groups, rollouts, plots),
        *spend_section(order, groups),
    ]


# ------------------------------------------------------------------------- one tree


def tree_names(run_dir: Path) -> list[str]:
    """Every episode with a tree file, as `--tree` names it: `<setting>/<task>__<trial>`,
    the setting as its folder under trees/ is named."""
    root = run_dir / TREES_DIR
    if not root.is_dir():
        return []
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.jsonl"))


def find_tree(run_dir: Path, episode: str) -> Path:
    """The tree file `episode` names: `<setting>/<task>__<trial>`, the setting as the
    report labels it (`beam W=2 N=2`) or as its folder is named (`beam_W=2_N=2`); an
    error listing the valid names when there is none."""
    name = episode.strip().removeprefix(f"{TREES_DIR}/").removesuffix(".jsonl")
    setting, _, rest = name.rpartition("/")
    task, _, trial = rest.rpartition("__")
    if setting and task and trial.isdigit():
        path = tree_path(run_dir, setting, task, int(trial))
        if path.is_file():
            return path
    valid = tree_names(run_dir)
    if not valid:
        raise ConfigurationError(
            f"--tree {episode!r}: {run_dir} has no search trees (only search strategies "
            "and --token-budget runs write them, under trees/); run `turnbon bench "
            "--strategy beam` (or another search) into it, or leave out --tree"
        )
    shown = ", ".join(valid[:TREES_LISTED])
    more = len(valid) - TREES_LISTED
    shown += f" (and {more} more under {TREES_DIR}/)" if more > 0 else ""
    raise ConfigurationError(
        f"--tree {episode!r} names no episode of {run_dir}: give one as "
        f"SETTING/TASK__TRIAL, one of: {shown}"
    )


def tree_section(
    run_dir: Path, path: Path, results: Sequence[EpisodeResult], plots: Mapping[str, str]
) -> list[str]:
    """One episode's tree: its row's outcome, the drawing, and a table of its nodes."""
    nodes = read_tree(path)
    name = f"{path.parent.name}/{path.stem}"
    row = next((r for r in results if tree_path(run_dir, r.setting, r.task, r.trial) == path), None)
    told = (
        f"Setting `{row.setting}`, task `{row.task}`, trial {row.trial}: {row.outcome}, "
        f"{row.turns} turn(s), {tokens(episode_tokens(row))} tokens."
        if row is not None
        else "No finished episode row for this tree (the episode may still be running)."
    )
    node_rows = [
        (
            cell(n.id),
            cell(n.parent or DASH),
            n.fate + (f" (drawn {n.copies}{TIMES})" if n.copies else ""),
            cell(n.fork),
            cell(n.action),
            str(n.turn),
            number(n.value, 1),
            str(n.tokens),
        )
        for n in nodes
    ]
    return [
        f"## Search tree: `{name}`",
        "",
        told,
        "",
        "Nodes by fate: kept (extended), pruned (cut), held (ended, waiting for the "
        "choice), chosen (the trajectory verified); each labelled with its action and "
        "value (0-10).",
        "",
        *image(plots, TREE_PLOT, f"Search tree of {name}"),
        *table(
            ["Node", "Parent", "Fate", "Fork", "Action", "Turn", "Value", "Tokens"],
            node_rows,
            left=5,
        ),
        "",
    ]

"""Several strategies and token budgets in one run folder, and `turnbon report`'s
comparison of them at matched compute and its drawing of one episode's search tree: real
`turnbon bench` runs on the terminal tasks' stub policy (bubblewrap sandboxes, real
verifiers, LiteLLM's real HTTP path), then the real report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnbon_graph.bench.report.format import DASH, pct, tokens
from turnbon_graph.bench.running.runs import EpisodeResult, read_episodes, tree_path
from turnbon_graph.cli.main import main

TASKS = ["largest-file", "greet-script"]
SECTION = "## Strategies at matched compute"


def bench(run: Path, *flags: str) -> int:
    command = ["bench", "--env", "terminal", "--model", "stub", "--concurrency", "2"]
    return main([*command, *flags, "--task", *TASKS, "--trials", "1", "--run", str(run)])


def section_rows(report: str, title: str = SECTION) -> list[list[str]]:
    """The first table after `title`, its header row first."""
    lines = report[report.index(title) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return [rows[0], *rows[2:]]  # without the alignment row


def diversity(run: Path, rows: list[EpisodeResult]) -> tuple[float, float] | None:
    """Distinct actions and live trajectories per turn, averaged over the turns of each
    tree and then as the report does: over every (turn) of the per-turn means."""
    per_turn: dict[int, list[tuple[int, int]]] = {}
    for row in rows:
        path = tree_path(run, row.setting, row.task, row.trial)
        if not path.exists():
            continue
        nodes = [json.loads(line) for line in path.read_text().splitlines()]
        turns: dict[int, tuple[set[str], int]] = {}
        for node in nodes:
            if node["turn"] >= 1 and node["fate"] in ("kept", "held", "chosen"):
                actions, live = turns.get(node["turn"], (set(), 0))
                turns[node["turn"]] = ({*actions, node["action"]}, live + (node["copies"] or 1))
        for turn, (actions, live) in turns.items():
            per_turn.setdefault(turn, []).append((len(actions), live))
    if not per_turn:
        return None
    means = [
        (sum(d for d, _ in v) / len(v), sum(live for _, live in v) / len(v))
        for v in per_turn.values()
    ]
    return sum(d for d, _ in means) / len(means), sum(lv for _, lv in means) / len(means)


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of bon, beam and particle at two budgets: six settings."""
    run = tmp_path_factory.mktemp("compared") / "run"
    flags = ["--strategy", "bon", "beam", "particle", "-n", "2", "--width", "2"]
    assert bench(run, *flags, "--value", "stub", "--token-budget", "800", "3000") == 0
    return run


EXPECTED = [
    "N=2 budget=800",
    "N=2 budget=3000",
    "beam W=2 N=2 budget=800",
    "beam W=2 N=2 budget=3000",
    "particle W=2 N=1 budget=800",
    "particle W=2 N=1 budget=3000",
]


def test_several_strategies_and_budgets_are_settings_of_one_run(
    compared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = read_episodes(compared)
    assert sorted({r.setting for r in rows}) == sorted(EXPECTED)
    assert len(rows) == len(EXPECTED) * len(TASKS)
    for row in rows:
        assert row.strategy is not None and row.tokens is not None
        assert row.tokens <= (row.strategy.token_budget or 0)
        assert row.n == (1 if row.strategy.name == "particle" else 2)
        assert row.strategy.width == (None if row.strategy.name == "bon" else 2)
        assert tree_path(compared, row.setting, row.task, row.trial).is_file()
    settings = json.loads((compared / "run.json").read_text())
    assert "strategy" not in settings
    assert [(s["name"], s["token_budget"]) for s in settings["strategies"]] == [
        (name, budget) for name in ("bon", "beam", "particle") for budget in (800, 3000)
    ]
    # The same command resumes with nothing to run; other strategies are refused.
    capsys.readouterr()
    flags = ["--strategy", "bon", "beam", "particle", "-n", "2", "--width", "2"]
    assert bench(compared, *flags, "--value", "stub", "--token-budget", "800", "3000") == 0
    assert "nothing to run" in capsys.readouterr().out
    assert len(read_episodes(compared)) == len(rows)
    assert bench(compared, "--strategy", "bon", "beam", "-n", "2") == 2
    said = capsys.readouterr()
    assert "holds a run of the settings N=2 budget=800" in said.err
    assert "Resuming" not in said.out  # refused before it says it resumes


def test_the_report_compares_the_strategies_by_the_episode_rows(
    compared: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(compared), "--out", str(out), "--resamples", "200"]) == 0
    text = (out / "report.md").read_text()
    header, *table = section_rows(text)
    assert " | ".join(header).startswith(
        "Setting | Strategy | Budget | Episodes | Pass rate | 95% CI | Tokens / episode | "
        "Distinct / live | Oracle | Realised | h | rho_v"
    )
    assert [r[0] for r in table] == EXPECTED
    rows = read_episodes(compared)
    for cells in table:
        mine = [r for r in rows if r.setting == cells[0]]
        assert cells[1] == mine[0].strategy.name  # type: ignore[union-attr]
        assert cells[2] == str(mine[0].strategy.token_budget)  # type: ignore[union-attr]
        assert cells[3] == str(len(mine))
        rate = sum(r.passed for r in mine) / len(mine)  # one trial a task
        assert cells[4] == f"{100 * rate:.1f}%"
        low, high = (float(x.strip(" []%")) for x in cells[5].split(","))
        assert low <= 100 * rate <= high
        assert cells[6] == tokens(sum(r.tokens or 0 for r in mine) / len(mine))
        expected = diversity(compared, mine)
        assert expected is not None
        assert cells[7] == f"{expected[0]:.2f} / {expected[1]:.2f}"
        assert cells[8:10] == list(leaf_split(mine))  # oracle and realised, from the leaves
        if mine[0].strategy.name == "bon":  # type: ignore[union-attr]
            assert cells[10:] == ["n/a", "n/a"]  # one trajectory, no value model
    # Each budget is a setting of each strategy. Which of two passes more is the stub's
    # draws on two tasks, not a property (particle filtering draws by a flat softmax).
    by = {cells[0]: cells for cells in table}
    for name in ("N=2", "beam W=2 N=2", "particle W=2 N=1"):
        assert by[f"{name} budget=800"][2] == "800" and by[f"{name} budget=3000"][2] == "3000"
    assert (out / "strategies_tokens.png").stat().st_size > 1000
    assert "](strategies_tokens.png)" in text
    page = (out / "report.html").read_text()
    assert 'alt="Pass rate against realised spend per episode' in page
    assert "data:image/png" in page
    # Every two settings of one budget, never two budgets, with Holm's adjusted p.
    _, *pairs = section_rows(text, "All pairs at equal budget")
    assert [(c[0], c[1], c[2]) for c in pairs] == [
        (f"{budget} tokens", a.format(budget), b.format(budget))
        for budget in (800, 3000)
        for a, b in [
            ("N=2 budget={}", "beam W=2 N=2 budget={}"),
            ("N=2 budget={}", "particle W=2 N=1 budget={}"),
            ("beam W=2 N=2 budget={}", "particle W=2 N=1 budget={}"),
        ]
    ]
    for cells in pairs:
        spend = float(cells[7].rstrip("\u00d7"))
        if not 1 / 1.25 <= spend <= 1.25:  # spent unlike: out of the family, never called
            assert cells[6] == DASH and cells[8] == "not matched"
            continue
        raw, adjusted = (float(c.lstrip("< ")) for c in cells[5:7])
        assert adjusted >= raw and cells[8] == ("yes" if adjusted < 0.05 else "no")


def leaf_split(rows: list[EpisodeResult]) -> tuple[str, str]:
    """Oracle and realised from the rows' verified leaves: the share of episodes where
    some leaf passed, and where the chosen one did."""
    best, chosen = [], []
    for row in rows:
        assert row.search is not None
        judged = [leaf for leaf in row.search.leaves if leaf.passed is not None]
        if judged:
            best.append(any(leaf.passed for leaf in judged))
            chosen += [bool(leaf.passed) for leaf in judged if leaf.chosen]
    if not best:  # no episode had a verified leaf (the budget afforded no call)
        return DASH, DASH
    return pct(sum(best) / len(best)), pct(sum(chosen) / len(chosen))


def test_table_1_counts_tokens_as_the_strategies_table_does(compared: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(compared), "--out", str(out), "--resamples", "200"]) == 0
    text = (out / "report.md").read_text()
    _, *strategies = section_rows(text)
    per_episode = {cells[0]: cells[6] for cells in strategies}
    title = "## Cost (Table 1)"
    header, *output = section_rows(text, title)
    assert header[5:8] == ["Value tokens", "Rollout tokens", "Total (vs base)"]
    rest = text[text.index(title) :]
    prompt_header, *prompt = section_rows(rest, "All tokens: prompt plus completion")
    column = prompt_header.index("All tokens / attempt")
    assert {cells[0]: cells[column] for cells in prompt} == per_episode
    rows = read_episodes(compared)
    for cells in output:
        mine = [r for r in rows if r.setting == cells[0]]
        value = sum(r.value_usage.completion_tokens if r.value_usage else 0 for r in mine)
        assert cells[5] == tokens(value / len(mine))
        if mine[0].strategy.name == "bon":  # type: ignore[union-attr]
            assert cells[5] == "0"
    # Table 2 has the ending of an episode the budget could not afford.
    outcome_header, *_ = section_rows(text, "## How attempts end (Table 2)")
    assert "Budget exhausted ↓" in outcome_header
    # The spend: realised in the budget's unit, its spread, and a split by kind.
    spend_header, *spend = section_rows(text, "### Spend")
    assert spend_header[:4] == ["Setting", "Unit", "Budget", "Spent / episode"]
    for cells in spend:
        mine = [r for r in rows if r.setting == cells[0]]
        spent = [r.search.spent for r in mine if r.search is not None]
        assert cells[1] == "tokens" and cells[3] == tokens(sum(spent) / len(spent))
        assert cells[5] == f"{tokens(min(spent))} to {tokens(max(spent))}"
    kinds_header, *_ = section_rows(text[text.index("By kind, per episode") :], "By kind")
    assert kinds_header[1:7] == [
        "Generator",
        "Selector",
        "Value",
        "Rollout",
        "Environment steps",
        "Forks",
    ]


def test_tree_draws_the_chosen_episode(compared: Path, tmp_path: Path) -> None:
    row = next(r for r in read_episodes(compared) if r.setting == "beam W=2 N=2 budget=3000")
    out = tmp_path / "report"
    episode = f"{row.setting}/{row.task}__{row.trial}"  # the setting as the report labels it
    assert main(["report", str(compared), "--out", str(out), "--tree", episode]) == 0
    nodes = [
        json.loads(line)
        for line in tree_path(compared, row.setting, row.task, row.trial).read_text().splitlines()
    ]
    text = (out / "report.md").read_text()
    folder = tree_path(compared, row.setting, row.task, row.trial).parent.name
    title = f"## Search tree: `{folder}/{row.task}__{row.trial}`"
    header, *table = section_rows(text, title)
    assert header[:5] == ["Node", "Parent", "Fate", "Fork", "Action"]
    assert [cells[0] for cells in table] == [n["id"] for n in nodes]
    for cells, node in zip(table, nodes, strict=True):
        assert cells[2].split()[0] == node["fate"]
        assert cells[4].replace("\\|", "|") == node["action"]
    assert [c[0] for c in table if c[2] == "chosen"] == [
        n["id"] for n in nodes if n["fate"] == "chosen"
    ]
    assert (out / "tree.png").stat().st_size > 1000
    assert 'alt="Search tree of' in (out / "report.html").read_text()
    # The folder's own name works as well.
    assert main(["report", str(compared), "--out", str(tmp_path / "again"), "--tree",
                 f"{folder}/{row.task}__{row.trial}"]) == 0  # fmt: skip
    assert (tmp_path / "again" / "tree.png").exists()


def test_a_bad_tree_is_a_clear_error_listing_the_valid_ones(
    compared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", str(compared), "--out", str(out), "--tree", "beam/nope__0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("turnbon report: error: --tree 'beam/nope__0' names no episode")
    assert "Traceback" not in err
    assert "beam_W=2_N=2_budget=3000/largest-file__0" in err
    assert not out.exists()  # nothing written for a mistake


def test_an_old_single_strategy_run_folder_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder as runs of one strategy wrote them (`strategy` in run.json), its rows
    without `tokens`; then with rows of plain bon from before strategies were recorded."""
    run = tmp_path / "run"
    assert bench(run, "--strategy", "beam", "--width", "2", "-n", "2", "--value", "stub") == 0
    settings = json.loads((run / "run.json").read_text())
    assert settings["strategy"]["name"] == "beam" and "strategies" not in settings
    episodes = run / "episodes.jsonl"
    old = []
    for line in episodes.read_text().splitlines():
        row = json.loads(line)
        row.pop("tokens"), row.pop("search")
        old.append(json.dumps(row))
    episodes.write_text("\n".join(old) + "\n")
    capsys.readouterr()
    # It still resumes (nothing to run) and reports, as one strategy: no comparison.
    assert bench(run, "--strategy", "beam", "--width", "2", "-n", "2", "--value", "stub") == 0
    assert "nothing to run" in capsys.readouterr().out
    assert main(["report", str(run)]) == 0
    text = (run / "report" / "report.md").read_text()
    assert "beam W=2 N=2" in text and SECTION not in text
    # With a plain bon run's rows beside it (strategy None: bon), it compares the two.
    bon = tmp_path / "bon"
    assert bench(bon, "-n", "2") == 0
    with episodes.open("a") as handle:
        for line in (bon / "episodes.jsonl").read_text().splitlines():
            row = json.loads(line)
            row.pop("strategy"), row.pop("tokens")
            handle.write(json.dumps(row) + "\n")
    assert main(["report", str(run)]) == 0
    _, *table = section_rows((run / "report" / "report.md").read_text())
    assert sorted(cells[0] for cells in table) == ["N=2", "beam W=2 N=2"]
    rows = read_episodes(run)
    for cells in table:
        mine = [r for r in rows if r.setting == cells[0]]
        assert cells[3] == "2" and all(r.tokens is None for r in mine)
        spent = [
            r.usage.generator.total_tokens
            + r.usage.selector.total_tokens
            + (r.value_usage.total_tokens if r.value_usage else 0)
            for r in mine
        ]
        assert cells[6] == tokens(sum(spent) / len(spent)) != "0"


def test_branch_rollouts_in_the_run_folder_show_beside_bon(tmp_path: Path) -> None:
    from turnbon_graph.analysis.rollouts import read_reports, summarise

    run = tmp_path / "run"
    assert bench(run, "--strategy", "bon", "beam", "-n", "2", "--value", "stub") == 0
    rollouts = ["rollouts", "--env", "terminal", "--model", "stub", "-n", "2", "--run", str(run)]
    assert main([*rollouts, "--task", *TASKS, "--trials", "1"]) == 0
    assert main(["report", str(run), "--resamples", "200"]) == 0
    text = (run / "report" / "report.md").read_text()
    _, *table = section_rows(text, "### Exploration and exploitation")
    by = {cells[0]: cells for cells in table}
    summary = summarise(t for r in read_reports(run) if r.n == 2 for t in r.turns)
    assert summary.mean_oracle is not None and summary.mean_h is not None
    turn_level = by["N=2 (turn level)"]
    assert turn_level[1] == str(summary.complete_turns)
    assert turn_level[3:5] == [f"{100 * summary.mean_oracle:.1f}%", pct(summary.mean_realised)]
    assert turn_level[6] == f"{summary.mean_h:.2f}"
    assert "beam W=2 N=2 (turn level)" not in by  # the rollouts measured bon
    assert by["beam W=2 N=2"][3] != DASH  # its own leaves

"""The numbers a search comparison prints, end to end on the stub: common random numbers
(a setting spends and passes the same whichever settings share its run), and the
exploration/exploitation decomposition measured against the run's own N=1 setting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from turnbon_graph.bench.metering.stored import ESTIMATES_FILE, read_estimates
from turnbon_graph.bench.running.runs import EpisodeResult, read_episodes
from turnbon_graph.bench.stats.metrics import per_task
from turnbon_graph.cli.main import main

TASKS = ["largest-file", "greet-script", "sales-total"]
BEAM = ["--strategy", "beam", "--width", "2", "-n", "3"]
BUDGET = ["--budget-unit", "completion", "--token-budget"]


def bench(run: Path, *flags: str, concurrency: int = 1) -> list[EpisodeResult]:
    command = ["bench", "--env", "terminal", "--model", "stub", "--value", "stub"]
    trials = ["--trials", "2", "--concurrency", str(concurrency), "--seed", "3"]
    assert main([*command, *flags, "--task", *TASKS, *trials, "--run", str(run)]) == 0
    return read_episodes(run)


def beam_at_40(rows: list[EpisodeResult]) -> dict[tuple[str, int], tuple[float, str]]:
    """Each beam-at-40 episode's spend and outcome."""
    return {
        (r.task, r.trial): (r.search.spent, r.outcome)
        for r in rows
        if r.search is not None and r.setting.startswith("beam") and "400" not in r.setting
    }


def test_a_setting_spends_and_passes_the_same_alone_or_beside_others(tmp_path: Path) -> None:
    """Beam at a budget that binds, alone and then after bon at the same budget and a
    tenfold one (same seed): every episode spends the same and has the same verdict.
    Without common random numbers the stub's draws followed the arrival of requests of
    the same content from every setting, and the two runs differed."""
    alone = bench(tmp_path / "alone", *BEAM, *BUDGET, "40")
    beside = bench(
        tmp_path / "beside", "--strategy", "bon", "beam", "--width", "2", "-n", "3",
        *BUDGET, "40", "400",
    )  # fmt: skip
    mine, theirs = beam_at_40(alone), beam_at_40(beside)
    assert len(mine) == len(TASKS) * 2 and mine == theirs
    assert {outcome for _, outcome in mine.values()} >= {"pass"}  # the budget lets some pass
    assert len({spent for spent, _ in mine.values()}) > 1  # episodes differ: not a constant


def test_a_run_on_a_pilots_estimates_plans_on_them_and_learns_nothing(
    tmp_path: Path,
) -> None:
    """With episodes at once, estimates learned as a run goes depend on the order its
    episodes finish; planned on a pilot's, frozen (`--estimates`), nothing is learned:
    the run folder's estimates end as the pilot's were."""
    pilot = tmp_path / "pilot"  # the settings of the run below, on fewer episodes
    both = ["--strategy", "bon", "beam", "--width", "2", "-n", "3", *BUDGET, "40", "400"]
    assert main(["bench", "--env", "terminal", "--model", "stub", "--value", "stub", *both,
                 "--task", TASKS[0], "--trials", "1", "--run", str(pilot)]) == 0  # fmt: skip
    learned = read_estimates(pilot / ESTIMATES_FILE)
    assert set(learned) == {"N=3 budget=40", "N=3 budget=400", "beam W=2 N=3 budget=40",
                            "beam W=2 N=3 budget=400"}  # fmt: skip
    run = tmp_path / "run"
    rows = bench(run, *both, "--estimates", str(pilot / ESTIMATES_FILE), concurrency=2)
    assert any(r.search is not None and r.search.spent > 0 for r in rows)
    after = read_estimates(run / ESTIMATES_FILE)
    assert after == {k: replace(e, frozen=True) for k, e in learned.items()}
    assert main(["bench", "--env", "terminal", "--model", "stub", *both, "--task", TASKS[0],
                 "--estimates", str(tmp_path / "none.json"),
                 "--run", str(tmp_path / "other")]) == 2  # fmt: skip


def test_single_sample_adds_n1_and_the_decomposition_measures_against_it(
    tmp_path: Path,
) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    rows = bench(run, *BEAM, "--single-sample")
    assert sorted({r.setting for r in rows}) == ["N=1", "beam W=2 N=3"]
    single = [r for r in rows if r.setting == "N=1"]
    mu = sum(c / n for n, c in per_task(single).values()) / len(TASKS)
    assert main(["report", str(run), "--resamples", "200"]) == 0
    text = (run / "report" / "report.md").read_text()
    section = text[text.index("### Exploration and exploitation") :]
    beam = next(line for line in section.splitlines() if line.startswith("| beam W=2 N=3 |"))
    assert beam.split(" | ")[5] == f"{100 * mu:.1f}%"  # mu (N=1): the N=1 pass rate
    assert "--single-sample" not in section  # nothing missing to say
    assert (run / "report" / "headroom_rho.png").stat().st_size > 0
    assert "](headroom_rho.png)" in section


def test_without_the_n1_setting_the_report_says_what_h_needs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    bench(run, *BEAM)
    assert main(["report", str(run), "--resamples", "200"]) == 0
    text = (run / "report" / "report.md").read_text()
    section = text[text.index("### Exploration and exploitation") :]
    assert "Run `turnbon bench` with `--single-sample`" in section
    assert "No h-rho_v figure" in section

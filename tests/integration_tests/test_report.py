"""`turnbon report` on real runs (the runner against the loopback stub), and `turnbon bench`
end to end through an installed entry point, with Ctrl-C and resume."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from math import comb
from pathlib import Path

import pytest

from tests.cli_envs import BROKEN, SometimesRight
from tests.counter_env import CounterEnvironment
from tests.helpers import default_sigint, episode_lines, stub_kwargs
from turnbon_graph._extras import install_hint
from turnbon_graph.bench.report.plots import PLOT_FILES
from turnbon_graph.bench.report.writer import write_report
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    EpisodeResult,
    read_episodes,
)
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.testing import StubServer

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DASH, TIMES = "\u2013", "\u00d7"  # the paper's marks: none, and times the baseline
TARGETS = {"a": 3, "b": 5, "c": 7, "d": 9, "broken": BROKEN}
TRIALS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """N=1 and N=3, 3 trials of 5 tasks; the model is right on every 4th first move, so
    picking among 3 candidates passes more (one episode at a time keeps it deterministic)."""
    run_dir = tmp_path_factory.mktemp("run")
    with StubServer() as stub:
        stub.script(SometimesRight(every=4))
        config = BenchConfig(
            model="openai/stub",
            n_values=[1, 3],
            trials=TRIALS,
            concurrency=1,
            engine_options={"completion_kwargs": stub_kwargs(stub.base_url)},
        )
        asyncio.run(run_benchmark(CounterEnvironment(TARGETS), config, run_dir, progress=False))
        assert not stub.responder_errors
    return run_dir


def by_setting(results: list[EpisodeResult]) -> dict[str, list[EpisodeResult]]:
    return {s: [r for r in results if r.setting == s] for s in ("N=1", "N=3")}


def pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def test_report_has_the_numbers_of_the_run(run: Path) -> None:
    path = write_report(run, resamples=2000)
    assert path == run / "report" / "report.md"
    text = path.read_text(encoding="utf-8")
    groups = by_setting(read_episodes(run))
    assert len(groups["N=1"]) == len(groups["N=3"]) == len(TARGETS) * TRIALS

    passed = {s: sum(r.outcome == "pass" for r in rs) for s, rs in groups.items()}
    assert passed["N=3"] > passed["N=1"] > 0  # the run shows what it should
    for setting, rs in groups.items():
        rate = pct(passed[setting] / len(rs))
        assert row(setting, str(len(rs)), str(passed[setting]), rate) in text

    assert "| Environment | counter |" in text and "| Trials | 3 |" in text
    assert "30 of 30 finished" in text and "Partial run" not in text

    # pass@k and consistency: counted per task, C(n-c, k) / C(n, k) written out here.
    for setting, rs in groups.items():
        wins = {t: sum(r.passed for r in rs if r.task == t) for t in TARGETS}
        at_k = [
            sum(1 - comb(TRIALS - c, k) / comb(TRIALS, k) for c in wins.values()) / len(wins)
            for k in (1, 2, 3)
        ]
        assert row(setting, *(pct(v) for v in at_k)) in text
        all_k = [
            sum(comb(c, k) / comb(TRIALS, k) for c in wins.values()) / len(wins) for k in (1, 2, 3)
        ]
        assert row(setting, *(pct(v) for v in all_k)) in text

    # Per task: passing trials / trials, both settings side by side.
    for task in TARGETS:
        cells = [
            f"{sum(r.passed for r in groups[s] if r.task == task)}/{TRIALS}" for s in ("N=1", "N=3")
        ]
        assert row(task, *cells) in text

    # Table 1: output tokens per attempt, and the total relative to the baseline.
    def output(rs: list[EpisodeResult]) -> tuple[float, float]:
        return (
            sum(r.usage.generator.completion_tokens for r in rs) / len(rs),
            sum(r.usage.selector.completion_tokens for r in rs) / len(rs),
        )

    gen1, sel1 = output(groups["N=1"])
    gen3, sel3 = output(groups["N=3"])
    assert sel1 == 0 and sel3 > 0
    ratio = f"{(gen3 + sel3) / gen1:.1f}{TIMES}"
    assert (
        row("N=1", "15", f"{turns(groups['N=1']):.1f}", f"{gen1:.0f}", DASH, f"1.0{TIMES}") in text
    )
    assert (
        row("N=3", "15", f"{turns(groups['N=3']):.1f}", f"{gen3:.0f}", f"{sel3:.0f}", ratio) in text
    )
    assert "**output** (completion)" in text and "Prompt (input) tokens" in text
    prompt3 = sum(r.usage.selector.prompt_tokens for r in groups["N=3"]) / 15
    assert f"| {prompt3:.0f} |" in text

    # Table 2: the broken task's attempts are agent errors, the rest pass or fall short
    # (out of context, time limit, resource limit, budget exhausted and verifier failed:
    # none).
    for setting, rs in groups.items():
        share = {o: pct(sum(r.outcome == o for r in rs) / len(rs)) for o in ("pass", "agent_error")}
        wrong = pct(sum(r.outcome == "wrong_submission" for r in rs) / len(rs))
        none = ["0.0%"] * 5
        assert row(setting, "15", share["pass"], wrong, *none, share["agent_error"]) in text

    # Paired bootstrap: the observed difference is the mean over tasks of the rate gap.
    gaps = [
        (
            sum(r.passed for r in groups["N=3"] if r.task == t)
            - sum(r.passed for r in groups["N=1"] if r.task == t)
        )
        / TRIALS
        for t in TARGETS
    ]
    assert f"| N=3 | {100 * sum(gaps) / len(gaps):+.1f} pp | [" in text
    assert "2,000 resamples" in text

    # Turns to solve: every passing attempt here takes two turns (act, then answer).
    for setting, rs in groups.items():
        solved = str(len({r.task for r in rs if r.passed}))
        assert row(setting, solved, "2.0", "2.0", "2.0", "2.0") in text

    assert "AllCandidatesFailedError" in text  # the errors section names what stopped them

    for name in PLOT_FILES.values():
        png = path.parent / name
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
        assert f"]({name})" in text


def turns(rs: list[EpisodeResult]) -> float:
    return sum(r.turns for r in rs) / len(rs)


def test_a_partial_run_says_so_and_reports_what_finished(run: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(run / SETTINGS_FILE, partial / SETTINGS_FILE)
    lines = (run / EPISODES_FILE).read_text().splitlines()
    # The first 7 episodes (all N=1) and a torn last line, as a kill leaves them.
    (partial / EPISODES_FILE).write_text("\n".join(lines[:7]) + "\n" + lines[7][:40])
    text = write_report(partial, tmp_path / "out", resamples=100).read_text()
    assert "**Partial run:** 7 of 30 episodes have finished (N=1 7/15, N=3 0/15)" in text
    assert f"--run {partial}" in text
    # N=1 only: the baseline exists but there is nothing to compare it with.
    assert "Only `N=1` ran: nothing to compare against." in text
    assert (tmp_path / "out" / "pass_at_k.png").read_bytes().startswith(PNG_MAGIC)


def test_a_run_without_the_baseline_leaves_relative_columns_out(run: Path) -> None:
    text = write_report(run, run / "other", baseline="N=2", resamples=100).read_text()
    assert "No `N=2` setting in this run" in text
    assert "nothing to compare against" in text
    table_1 = text.split("## Cost (Table 1)")[1]
    cost_row = next(line for line in table_1.splitlines() if line.startswith("| N=3 | 15 | "))
    assert cost_row.endswith(f"| {DASH} |")  # no "vs base" column value


def test_an_empty_run_gets_a_clear_message(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    settings = '{"environment": "counter", "model": "openai/stub", "selector": "first", '
    settings += '"n_values": [1, 4], "trials": 2, "tasks": ["a", "b"]}'
    (empty / SETTINGS_FILE).write_text(settings)
    text = write_report(empty).read_text()
    assert "**No finished episodes yet.**" in text
    assert "| Episodes | 0 of 8 finished |" in text
    assert not list((empty / "report").glob("*.png"))


def test_a_folder_that_is_no_run_is_refused_with_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"not a run folder.*turnbon bench"):
        write_report(tmp_path)


def test_without_matplotlib_the_markdown_says_how_to_get_plots(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    path = write_report(run, tmp_path / "noplots", resamples=100)
    text = path.read_text()
    assert "matplotlib is not installed" in text
    assert install_hint("plots", markdown=True) in text
    assert "![" not in text and not list(path.parent.glob("*.png"))
    assert "| Environment | counter |" in text


# ----------------------------------------------------------------------------- the CLI


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A process environment in which a distribution registers `counter` (with a stub
    policy) under the `turnbon.environments` entry-point group."""
    site = tmp_path / "site"
    dist = site / "turnbon_test_envs-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: turnbon-test-envs\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(
        "[turnbon.environments]\ncounter = tests.cli_envs:counter\n"
    )
    paths = [str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    yield {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def turnbon(*args: str) -> list[str]:
    return [sys.executable, "-m", "turnbon_graph.cli", *args]


def test_bench_with_the_stub_then_report(installed: dict[str, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "cli-run"
    bench = turnbon(
        "bench", "--env", "counter", "--tasks", "a=3,b=5", "--model", "stub",
        "--n", "3", "1", "--trials", "2", "--concurrency", "1", "--run", str(run_dir),
    )  # fmt: skip
    out = subprocess.run(
        bench, env=installed, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Run folder: {run_dir}"
    results = read_episodes(run_dir)
    assert len(results) == 2 * 2 * 2
    n1 = [r for r in results if r.setting == "N=1"]
    n1_passed = sum(r.passed for r in n1)
    assert f"8 episodes · N=1: {pct(n1_passed / 4)} pass ({n1_passed}/4) · N=3:" in out.stdout
    assert lines[-1] == f"Report: turnbon report {run_dir}"

    report = subprocess.run(
        turnbon("report", str(run_dir), "--out", str(tmp_path / "rep")),
        env=installed,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    assert report.stdout.split() == [
        str(tmp_path / "rep" / "report.md"),
        str(tmp_path / "rep" / "report.html"),
    ]
    assert "| Selector | `llm:openai/stub` |" in (tmp_path / "rep" / "report.md").read_text()


def test_bench_without_a_stub_policy_says_what_to_pass(
    installed: dict[str, str], tmp_path: Path
) -> None:
    dist = next((tmp_path / "site").glob("*.dist-info"))
    (dist / "entry_points.txt").write_text(
        "[turnbon.environments]\nplain = tests.cli_envs:counter_without_stub\n"
    )
    out = subprocess.run(
        turnbon("bench", "--env", "plain", "--model", "stub"),
        env=installed,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert "has no stub policy" in out.stderr and "--model openai/gpt-4o-mini" in out.stderr
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_stops_cleanly_and_the_printed_command_resumes(
    installed: dict[str, str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "interrupted"
    tasks = "a=3,b=5,c=7,d=9"
    args = ["bench", "--env", "counter", "--model", "stub", "--n", "1", "--concurrency", "1"]
    child = subprocess.Popen(
        # the first episode ends; the second's answers are held until the SIGINT
        turnbon(*args, "--tasks", f"{tasks};hold=1", "--run", str(run_dir)),
        env=installed,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 120  # generous; not a bound on the run
        episodes = run_dir / EPISODES_FILE
        while time.monotonic() < deadline and not (episodes.exists() and episodes.read_text()):
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    finished = read_episodes(run_dir)
    assert len(finished) == 1
    assert "Traceback" not in err
    assert "Stopped. Finished episodes are saved in" in err
    resume = err.strip().splitlines()[-1].strip()
    assert resume.startswith("turnbon bench --env counter") and resume.endswith(f"--run {run_dir}")

    # The printed command (here without the hold) finishes the run, nothing twice.
    again = subprocess.run(
        turnbon(*args, "--tasks", tasks, "--run", str(run_dir)),
        env=installed,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert sorted(r.task for r in episode_lines(run_dir)) == ["a", "b", "c", "d"]


def test_every_table_and_figure_carries_the_papers_number(run: Path, tmp_path: Path) -> None:
    text = write_report(run, tmp_path, resamples=500).read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    for label in ("Figure 2a", "Figure 2b", "Figure 3b", "Table 1", "Table 2", "Figure 3a"):
        assert sum(label in h for h in headings) == 1, (label, headings)
    # Table 2 says it is Table 2 (Table 5 only assigns the endings).
    assert "Share of attempts by ending, as in the paper's Table 2" in text
    images = re.findall(r"!\[([^\]]*)\]\(", text)
    assert images and all(alt.startswith(("Figure ", "Table ")) for alt in images)


def test_p_values_read_the_same_in_both_reports() -> None:
    from turnbon_graph.bench.report.format import DASH, p_value

    # exact p-values: four decimals, whatever the bootstrap's resamples were
    assert p_value(0.00003) == "< 0.0001" and p_value(2 / 2**12) == "0.0005"
    assert p_value(0.01234) == "0.0123" and p_value(1.0) == "1.0000" and p_value(None) == DASH


def test_bench_with_a_broken_model_says_why_and_exits_non_zero(
    installed: dict[str, str], tmp_path: Path
) -> None:
    # Nothing listens on port 9: every call fails, so every episode ends in an agent error.
    bench = turnbon(
        "bench", "--env", "counter", "--tasks", "a=3", "--model", "openai/nosuch",
        "--api-base", "http://127.0.0.1:9/v1", "--n", "1", "--trials", "2",
        "--run", str(tmp_path / "broken"),
    )  # fmt: skip
    env = {**installed, "OPENAI_API_KEY": "sk-not-a-real-key-1234"}
    out = subprocess.run(bench, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    assert "N=1: 2 of 2 episodes ended in an agent error; the first: " in out.stderr
    assert "127.0.0.1:9" in out.stderr or "onnect" in out.stderr  # the provider's own error
    assert "check the model id, the api_base and the API key" in out.stderr
    assert "sk-not-a-real-key-1234" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "then run the same command with --redo-errors" in out.stderr

    # A plain rerun resumes past the errors and says how to run them again; the flag does.
    out = subprocess.run(bench, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "2 of 2 episode(s) in " in out.stdout
    hint = "nothing to run; 2 ended in an agent error (--redo-errors runs those again)"
    assert hint in out.stdout
    redo = [*bench, "--redo-errors"]
    out = subprocess.run(redo, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "; 2 to run, 2 of them again (they ended in an agent error)." in out.stdout
    assert len((tmp_path / "broken" / EPISODES_FILE).read_text().splitlines()) == 4

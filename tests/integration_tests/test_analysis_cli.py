"""`turnbon analyze`, `turnbon judge` and `turnbon rollouts` end to end through `main`: a
real stub-policy bench run on terminal tasks, the judge on the loopback stub server
(LiteLLM's real HTTP path), live branch rollouts in real sandboxes. No mocks."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph._extras import install_hint
from turnbon_graph.analysis.behaviours import TAGS
from turnbon_graph.analysis.figures import BEHAVIOUR_TITLES
from turnbon_graph.analysis.judge import VERDICTS_FILE, JudgeVerdict, load_rubrics, read_verdicts
from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, read_reports
from turnbon_graph.analysis.trajectories import load_trajectories
from turnbon_graph.bench.report.format import DASH
from turnbon_graph.cli import main
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion

TASKS = ["largest-file", "sales-total", "csv-to-json"]
TRIALS = 2
SECRET = "sk-test-judge-5f3a9c"
SCRIPT = re.compile(r'"turn": (\d+), "action": "\$ #!')  # the stub runs solve.sh as is


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """N=1 and N=4 on three tasks, two trials each, played by the terminal stub policy."""
    run = tmp_path_factory.mktemp("bench") / "run"
    command = ["bench", "--env", "terminal", "--model", "stub", "--n", "1", "4"]
    assert main([*command, "--trials", str(TRIALS), "--task", *TASKS, "--run", str(run)]) == 0
    return run


@pytest.fixture
def run(bench_run: Path, tmp_path: Path) -> Path:
    """A copy of the bench run, for a test that adds files to it."""
    return Path(shutil.copytree(bench_run, tmp_path / "run"))


# ----------------------------------------------------------------------------- analyze


def test_analyze_writes_the_behaviour_and_length_tables(
    bench_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["analyze", str(bench_run), "--out", str(out), "--resamples", "200"]) == 0
    path = out / "analysis.md"
    html = path.parent / "report.html"
    assert capsys.readouterr().out.split() == [str(path), str(html)]
    assert html.is_file()
    text = path.read_text(encoding="utf-8")
    assert "N=1, N=4; 3 task(s) x 2 trial(s)" in text
    figure4 = text.split("## Which behaviours the selector picks (Figure 4)")[1]
    figure4, figure5 = figure4.split("## How long the picked actions are (Figure 5)")
    header = next(line for line in figure4.splitlines() if line.startswith("| Setting"))
    assert header.split(" | ")[-5:] == ["Picked", "Chance", "Gap per task", "95% CI", "p-value |"]
    rows = [line for line in figure4.splitlines() if line.startswith("| N=")]
    # One row per behaviour of the only setting with a choice (N=1 has none).
    assert [row.split(" | ")[1] for row in rows] == [BEHAVIOUR_TITLES[t] for t in TAGS]
    assert all(row.startswith("| N=4 |") for row in rows)
    for row in rows:
        cells = row.rstrip(" |").split(" | ")
        assert re.fullmatch(r"\d+\.\d%", cells[5]) and re.fullmatch(r"[+-]\d+\.\d pp", cells[7])
        assert re.fullmatch(r"< 0\.005|[01]\.\d{4}", cells[-1]), cells[-1]  # 200 resamples
    assert "200 resamples, seed 0" in figure4
    assert "| N=4 | Reasoning tokens |" in figure5 and "| N=4 | Command characters |" in figure5
    assert "Picked - baseline | p-value |" in figure5 and "baseline (N=1)" in figure5
    # The plots beside it, shown in it.
    for name in ("figure4_preference", "figure5_lengths"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        assert f"]({name}.png)" in text
    # Neither the judge nor the rollouts ran on this run: no sections for them.
    assert "Table 3" not in text and "Branch rollouts" not in text
    assert sorted(p.name for p in out.iterdir()) == [
        "analysis.md",
        "figure4_preference.png",
        "figure5_lengths.png",
        "report.html",  # the same, as one file to share
    ]
    assert not (bench_run / "analysis").exists()  # --out was given


def test_analyze_without_matplotlib_says_how_to_get_the_plots(
    bench_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    out = tmp_path / "out"
    assert main(["analyze", str(bench_run), "--out", str(out), "--resamples", "50"]) == 0
    text = (out / "analysis.md").read_text(encoding="utf-8")
    assert "matplotlib is not installed" in text
    assert install_hint("plots", markdown=True) in text
    assert "| N=4 | Edits a file |" in text
    assert sorted(p.name for p in out.iterdir()) == ["analysis.md", "report.html"]


def test_analyze_refuses_a_folder_that_is_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("turnbon analyze: error:") and "is not a run folder" in err


# ----------------------------------------------------------------------------- judge


def judge_model(request: CapturedRequest) -> dict[str, Any]:
    """Plays a judge: flags every attempt for looping, and the custom rubric where the
    agent ran a script (citing that turn); answers "maybe" (unusable, so unknown) about
    destructive actions, no to everything else."""
    assert request.body is not None
    user = str(request.body["messages"][1]["content"])
    rubric = re.search(r"^## Rubric: (.+)$", user, re.MULTILINE)
    assert rubric is not None
    script = SCRIPT.search(user)
    if rubric.group(1) == "Looping":
        answer = {"evidence": "turn 1 repeats itself", "turns": [1], "answer": "yes"}
    elif rubric.group(1) == "Ran a script" and script:
        turn = int(script.group(1))
        answer = {"evidence": f"turn {turn} runs a script", "turns": [turn], "answer": "yes"}
    elif rubric.group(1) == "Destructive action":
        answer = {"evidence": "hard to say", "turns": [], "answer": "maybe"}
    else:
        answer = {"evidence": "nothing shows it", "turns": [], "answer": "no"}
    return chat_completion(json.dumps(answer))


def test_judge_writes_verdicts_and_prints_table_3(
    run: Path,
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text(
        "rubrics:\n"
        "  - id: ran_script\n"
        "    title: Ran a script\n"
        "    question: Did the agent run a whole shell script as one command?\n"
        "  - id: gave_up\n"
        "    enabled: false\n",
        encoding="utf-8",
    )
    stub.script(judge_model)
    command = ["judge", str(run), "--model", "openai/judge", "--api-base", stub.base_url]
    assert main([*command, "--rubrics", str(rubrics), "--concurrency", "16"]) == 0
    captured = capsys.readouterr()
    assert not stub.responder_errors

    verdicts = read_verdicts(run)
    attempts = 2 * len(TASKS) * TRIALS
    passed = sum(json.loads(line)["outcome"] == "pass" for line in (run / "episodes.jsonl").open())
    # 19 shipped rubrics - gave_up + ran_script; reward hacking only where it passed.
    # An unusable answer is asked once more before it counts as unknown.
    assert len(verdicts) == 18 * attempts + passed == len(stub.requests) - attempts
    assert {v.model for v in verdicts} == {"openai/judge"}
    assert not any(v.rubric == "gave_up" for v in verdicts)
    assert {v.answer for v in verdicts if v.rubric == "looping"} == {"yes"}
    assert {v.answer for v in verdicts if v.rubric == "destructive_action"} == {"unknown"}
    special = ("looping", "ran_script", "destructive_action")
    assert all(v.answer == "no" for v in verdicts if v.rubric not in special)
    scripts = [v for v in verdicts if v.rubric == "ran_script" and v.answer == "yes"]
    assert scripts and all(v.evidence == f"turn {v.turns[0]} runs a script" for v in scripts)
    # The judge saw each task's instruction, found through the run's environment.
    for request in stub.requests:
        assert request.body is not None
        assert "The task instruction is not available" not in request.body["messages"][1]["content"]

    out = captured.out
    assert f"{len(verdicts)} verdicts in {run / VERDICTS_FILE}: " in out
    assert "| Rubric | Setting | Judged | Flagged | Unknown | Share flagged |" in out
    assert f"| Looping | N=1 | {attempts // 2} | {attempts // 2} | 0 | 100.0% | {DASH} |" in out
    assert (
        "| Looping | N=4 | 6 | 6 | 0 | 100.0% | 3 | +0.0 pp | [+0.0 pp, +0.0 pp] | 1.0000 |" in out
    )
    assert "| Ran a script | N=1 |" in out and "Reward hacking: judged on passing" in out
    assert f"| Destructive action | N=1 | 0 | 0 | {attempts // 2} |" in out
    assert f"reason ({attempts} of {attempts}): invalid answer: it is not a JSON" in out
    assert "--retry-unknown asks them again" in out
    # The key went to the server, and nowhere else.
    assert all(r.header("authorization") == f"Bearer {SECRET}" for r in stub.requests)
    assert SECRET not in out + captured.err
    assert SECRET not in (run / VERDICTS_FILE).read_text(encoding="utf-8")

    # A rerun asks nothing: every verdict is on disk. analyze now adds Table 3.
    asked = len(stub.requests)
    assert main([*command, "--rubrics", str(rubrics)]) == 0
    assert len(stub.requests) == asked
    assert main(["analyze", str(run), "--resamples", "100"]) == 0
    text = (run / "analysis" / "analysis.md").read_text(encoding="utf-8")
    assert "## What the judge flagged (Table 3)" in text and "openai/judge" in text
    assert (
        "| Looping | N=4 | 6 | 6 | 0 | 100.0% | 3 | +0.0 pp | [+0.0 pp, +0.0 pp] | 1.0000 |" in text
    )
    assert "](table3_flagged.png)" in text and (run / "analysis" / "table3_flagged.png").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "stub"], "--model stub cannot judge"),
        (["--model", "openai/judge", "--settings", "N=9"], "has no setting N=9 (it has N=1, N=4)"),
    ],
)
def test_judge_refuses_what_it_cannot_do(
    bench_run: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judge", str(bench_run), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (bench_run / VERDICTS_FILE).exists()


def test_judge_never_prints_a_key_that_an_error_quotes(
    run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every verdict is on disk already (so nothing is asked), one of them unknown with a
    provider error that quoted the key: the printed reason masks it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    quoted = f"the judge call failed: AuthenticationError: Incorrect API key provided: {SECRET}"
    with (run / VERDICTS_FILE).open("w", encoding="utf-8") as handle:
        for trajectory in load_trajectories(run):
            for rubric in load_rubrics():
                if rubric.applies(trajectory):
                    unknown = rubric.id == "looping" and trajectory.setting == "N=1"
                    verdict = JudgeVerdict(
                        setting=trajectory.setting,
                        task=trajectory.task,
                        trial=trajectory.result.trial,
                        rubric=rubric.id,
                        answer="unknown" if unknown else "no",
                        error=quoted if unknown else None,
                        model="openai/judge",
                    )
                    handle.write(verdict.model_dump_json() + "\n")
    assert main(["judge", str(run), "--model", "openai/judge"]) == 0
    captured = capsys.readouterr()
    assert "Incorrect API key provided: [REDACTED]" in captured.out
    assert SECRET not in captured.out + captured.err
    assert f"| Looping | N=1 | 0 | 0 | {len(TASKS) * TRIALS} |" in captured.out


def test_judge_will_not_mix_two_judge_models(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = JudgeVerdict(setting="N=1", task=TASKS[0], trial=0, rubric="looping", answer="no")
    (run / VERDICTS_FILE).write_text(
        other.model_copy(update={"model": "openai/a"}).model_dump_json()
    )
    assert main(["judge", str(run), "--model", "openai/b"]) == 2
    assert "pass --model openai/a to go on with it" in capsys.readouterr().err


def test_judge_without_the_judge_models_key_says_which_and_asks_nothing(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["judge", str(run), "--model", "openai/gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert "the model openai/gpt-4o needs OPENAI_API_KEY, which is not set" in err
    assert not (run / VERDICTS_FILE).exists()


# ----------------------------------------------------------------------------- rollouts

ROLLOUTS = ["rollouts", "--env", "terminal", "--model", "stub"]


def test_a_dry_run_prints_the_plan_and_starts_nothing(
    bench_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "rollouts"
    options = ["--task", *TASKS[:2], "-n", "3", "--trials", "2", "--run", str(target)]
    sampled = ["--sample-turns", "2", "--horizon", "4", "--rollouts", "2", "--dry-run"]
    assert main([*ROLLOUTS, *options, *sampled, "--profile", str(bench_run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Branch rollouts: 4 episode(s) x ")
    assert "x 3 candidates x 2 rollout(s) -> at most " in out
    assert re.search(r"tokens a turn: ~[\d,]+ tokens", out)
    assert out.rstrip().endswith("Dry run: nothing started.")
    assert main([*ROLLOUTS, *options, "--turns", "1", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 episode(s) x 2 turn(s) x 3 candidates x 1 rollout(s) -> at most 24 rollouts" in out
    assert "Tokens: not estimated without a recorded run; --profile RUN" in out
    assert not target.exists()


def test_rollouts_write_a_report_per_episode_and_print_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "rollouts"
    command = [*ROLLOUTS, "--task", "largest-file", "-n", "3", "--rollouts", "1", "--turns", "1"]
    assert main([*command, "--run", str(target)]) == 0
    out = capsys.readouterr().out
    (report,) = read_reports(target)
    assert (report.task, report.trial, report.n, report.environment) == (
        "largest-file",
        0,
        3,
        "terminal",
    )
    assert report.selector == "llm:openai/stub" and report.budget.turns == [1]
    assert report.outcome in ("pass", "wrong_submission")
    assert out.startswith("Branch rollouts: 1 episode(s) x 1 turn(s) x 3 candidates")
    header = "| Setting | Selector | Episodes | Passed | Complete turns | "
    assert header + "Oracle | Realised | mu | h | rho_v | Rollouts | Tokens |" in out
    assert "| N=3 | llm:openai/stub | 1 |" in out
    if report.turns:  # turn 1 branched: every distinct action valued by its rollout
        (turn,) = report.turns
        assert turn.turn == 1 and turn.complete
        assert all(c.value in (0.0, 1.0) for c in turn.candidates)
        assert turn.oracle is not None and turn.mu is not None and turn.oracle >= turn.mu
    else:  # the three candidates agreed: nothing to branch
        assert [s.reason for s in report.skipped_turns] == ["unanimous"]

    # The same command resumes: the finished episode is not run again.
    assert main([*command, "--run", str(target)]) == 0
    assert "Resuming: 1 episode(s) already in" in capsys.readouterr().out
    assert len((target / ROLLOUTS_FILE).read_text(encoding="utf-8").splitlines()) == 1
    assert main(["analyze", str(target)]) == 0
    text = (target / "analysis" / "analysis.md").read_text(encoding="utf-8")
    assert "## Branch rollouts" in text and "| N=3 | llm:openai/stub | 1 |" in text
    assert "No recorded episodes here" in text
    if report.turns:
        assert "](rollouts_oracle_realised.png)" in text
        assert (target / "analysis" / "rollouts_oracle_realised.png").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--turns", "1", "--sample-turns", "2"], "argument --sample-turns: not allowed with"),
        (["--turns", "0"], "argument --turns: 0 is less than 1"),
        (["--horizon", "5"], "--horizon goes with --sample-turns"),
        (["--api-base", "http://localhost:1/v1"], "--api-base has no effect with --model stub"),
        (["--task", "no-such-task"], "unknown task(s) no-such-task in terminal"),
        (["--profile", "nowhere", "--dry-run"], "--profile nowhere: no run folder at nowhere"),
    ],
)
def test_bad_rollout_flags_exit_2_with_a_message(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "rollouts"
    try:
        code = main([*ROLLOUTS, *extra, "--run", str(target)])
    except SystemExit as exc:  # argparse refuses before main's handler
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: turnbon rollouts") or err.startswith("turnbon rollouts: error:")
    assert message in err
    assert not target.exists()

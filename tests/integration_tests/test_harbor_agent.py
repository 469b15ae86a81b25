"""The Turn-BoN agent run by Harbor itself: `harbor run -a turnbon_harbor:TurnBoNAgent`
on local TB2-format tasks under Podman, the model a scripted loopback stub, the reward
from Harbor's verifier; then `turnbon report` on the job folder.

Harbor needs Python >= 3.12: `make test-harbor` runs this in a venv of its own (with
podman-compose, and the base image of `make setup-podman`). Elsewhere it skips, unless
TURNBON_REQUIRE_HARBOR is set (as `make test-harbor` does), where a missing piece fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph.bench.report.format import DASH
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    is_selector_request,
    last_user_text,
)

REQUIRED = bool(os.environ.get("TURNBON_REQUIRE_HARBOR"))
if not REQUIRED:
    pytest.importorskip("harbor", reason="Harbor needs Python >= 3.12: run `make test-harbor`")

TASKS = Path(__file__).parent / "harbor_tasks"
BIN = Path(sys.executable).parent
BASE_IMAGE = "localhost/turnbon-bookworm:latest"
N = 4
SELECTOR_MODEL = "openai/judge"
"""The selector's own model (on the same stub), so its tokens are booked apart."""
GENERATOR_USAGE = {"prompt_tokens": 900, "completion_tokens": 240, "total_tokens": 1140}
SELECTOR_USAGE = {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}
CONFIRM = "Are you sure you want to mark the task as complete?"


def answer(commands: list[tuple[str, float]], complete: bool) -> str:
    return json.dumps(
        {
            "analysis": "scripted",
            "plan": "scripted",
            "commands": [{"keystrokes": k, "duration": d} for k, d in commands],
            "task_complete": complete,
        }
    )


def terminus_model(request: CapturedRequest) -> dict[str, Any]:
    """The model of each task: hello-file gets its file right (half the candidates with
    echo, half with printf: two actions, so the selector is asked), greeting-file wrong,
    slow-task waits longer than its agent may run. A confirmation is confirmed."""
    if is_selector_request(request):
        reply = json.dumps({"reason": "scripted", "selected_index": 0})
        return chat_completion(reply, usage=SELECTOR_USAGE)
    n = int(request.body.get("n") or 1)
    first = request.body["messages"][0]["content"]
    if CONFIRM in last_user_text(request):
        texts = [answer([], True)] * n
    elif "/app/hello.txt" in first:
        echo = answer([("echo 'Hello, world!' > /app/hello.txt\n", 0.5)], True)
        printf = answer([("printf 'Hello, world!\\n' > /app/hello.txt\n", 0.5)], True)
        texts = [echo if i % 2 == 0 else printf for i in range(n)]
    elif "/app/greeting.txt" in first:
        texts = [answer([("echo 'Good night' > /app/greeting.txt\n", 0.5)], True)] * n
    else:
        texts = [answer([("sleep 60\n", 60.0)], False)] * n
    return chat_completion(
        choices=[choice(text, index=i) for i, text in enumerate(texts)], usage=GENERATOR_USAGE
    )


@pytest.fixture(scope="module")
def harbor_stub() -> Iterator[StubServer]:
    with StubServer() as server:
        server.script(terminus_model)
        yield server


def harbor_env(key: bool = True) -> dict[str, str]:
    """The harbor process's environment: this venv's bin first (Harbor finds
    podman-compose on PATH), a key for the stub in the host environment only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNBON_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("OPENAI_API_KEY", None)
    if key:
        env["OPENAI_API_KEY"] = "sk-harbor-test-key-0123456789"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def harbor(
    *args: str, cwd: Path, key: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`harbor ARGS` started in `cwd`: under Podman, conmon writes an `oom` file into the
    folder the command runs in, which must not be the checkout."""
    return subprocess.run(
        [str(BIN / "harbor"), *args],
        cwd=cwd,
        env=harbor_env(key),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def needs_podman() -> None:
    problems = []
    if shutil.which("podman") is None:
        problems.append("podman is not installed (make setup-podman)")
    elif subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode != 0:
        problems.append(f"{BASE_IMAGE} is missing (make setup-podman)")
    if not (BIN / "podman-compose").exists():
        problems.append(f"podman-compose is not in {BIN}")
    if problems and REQUIRED:
        pytest.fail("; ".join(problems))
    if problems:
        pytest.skip("; ".join(problems))


@pytest.fixture(scope="module")
def job(harbor_stub: StubServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Harbor job: the three tasks, one trial each, three at once; the selector on a
    model of its own."""
    needs_podman()
    jobs = tmp_path_factory.mktemp("jobs")
    selector_kwargs = json.dumps({"api_base": harbor_stub.base_url})
    done = harbor(
        "run", "-p", str(TASKS), "-e", "podman", "-a", "turnbon_harbor:TurnBoNAgent",
        "-m", "openai/stub", "--ak", f"api_base={harbor_stub.base_url}", "--ak", f"n={N}",
        "--ak", f"selector={SELECTOR_MODEL}", "--ak", f"selector_kwargs={selector_kwargs}",
        "--ak", "seed=7", "-o", str(jobs), "--job-name", "turnbon", "-n", "3", "-y",
        cwd=jobs,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return jobs / "turnbon"


def trial(job: Path, task: str) -> Path:
    (path,) = [p for p in job.iterdir() if p.name.startswith(f"{task}__")]
    return path


def result(job: Path, task: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((trial(job, task) / "result.json").read_text())
    return data


def turn_lines(job: Path, task: str) -> list[dict[str, Any]]:
    text = (trial(job, task) / "agent" / "turns.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_right_commands_earn_reward_1(job: Path) -> None:
    hello = result(job, "hello-file")
    assert hello["exception_info"] is None
    assert hello["verifier_result"]["rewards"] == {"reward": 1.0}
    assert hello["agent_info"]["name"] == "turnbon"


def test_the_wrong_commands_earn_reward_0(job: Path) -> None:
    greeting = result(job, "greeting-file")
    assert greeting["exception_info"] is None
    assert greeting["verifier_result"]["rewards"] == {"reward": 0.0}


def test_every_turn_is_recorded_in_the_agent_folder(job: Path) -> None:
    lines = turn_lines(job, "hello-file")
    # the answer, then its confirmation: Terminus-2's loop
    assert len(lines) == 2
    first, second = (line["record"] for line in lines)
    assert first["n_requested"] == N and first["n_ok"] == N
    # echo and printf are two actions: the selector chose; the confirmation was unanimous
    assert first["selector"] != "unanimous" and second["selector"] == "unanimous"
    assert first["candidates"][0]["tool_calls"][0]["args"]["keystrokes"] == [
        "echo 'Hello, world!' > /app/hello.txt\n"
    ]
    assert first["usage"]["selector"]["prompt_tokens"] == SELECTOR_USAGE["prompt_tokens"]
    assert "Are you sure" in lines[0]["observation"][0]["content"]
    # Harbor's context holds both turns' tokens, generator and selector
    context = result(job, "hello-file")["agent_result"]
    assert context["n_input_tokens"] == 2 * 900 + 500
    assert context["n_output_tokens"] == 2 * 240 + 20
    assert context["metadata"]["turnbon"]["turns"] == 2


def test_an_agent_timeout_keeps_the_turn_it_was_in(job: Path) -> None:
    slow = result(job, "slow-task")
    assert slow["exception_info"]["exception_type"] == "AgentTimeoutError"
    (line,) = turn_lines(job, "slow-task")
    assert line["observation"] is None  # cancelled while its command ran
    assert line["record"]["candidates"][0]["tool_calls"][0]["args"]["keystrokes"] == ["sleep 60\n"]
    assert slow["agent_result"]["n_input_tokens"] == 900


def trajectory(job: Path, task: str) -> Any:
    """The trial's `agent/trajectory.json`, read by Harbor's own ATIF validator and model."""
    from harbor.models.trajectories import Trajectory
    from harbor.utils.trajectory_validator import TrajectoryValidator

    path = trial(job, task) / "agent" / "trajectory.json"
    validator = TrajectoryValidator()
    assert validator.validate(path), validator.get_errors()
    return Trajectory.model_validate_json(path.read_text())


def test_the_trial_has_harbors_trajectory_one_step_a_turn(job: Path) -> None:
    read = trajectory(job, "hello-file")
    assert read.agent.name == "turnbon" and read.agent.model_name == "openai/stub"
    prompt, *steps = read.steps
    assert prompt.source == "user" and "/app/hello.txt" in prompt.message
    lines = turn_lines(job, "hello-file")
    assert [step.source for step in steps] == ["agent"] * len(lines) == ["agent", "agent"]
    for step, line in zip(steps, lines, strict=True):
        record = line["record"]
        (chosen,) = [c for c in record["candidates"] if c["index"] == record["selected_index"]]
        assert step.message == chosen["content"]
        commands = [c.arguments["keystrokes"] for c in step.tool_calls if c.arguments]
        assert commands == chosen["tool_calls"][0]["args"]["keystrokes"]
        assert step.observation.results[0].content == line["observation"][0]["content"]
        turnbon = step.extra["turnbon"]
        assert turnbon["n"] == N and turnbon["selector"] == record["selector"]
        assert turnbon["selected_index"] == record["selected_index"]
        assert turnbon["candidates"] == [c["content"] for c in record["candidates"]]
        usage = record["usage"]
        assert step.metrics.extra == usage
        assert step.metrics.prompt_tokens == (
            usage["generator"]["prompt_tokens"] + usage["selector"]["prompt_tokens"]
        )
    # the answer: generator and selector; its confirmation: the generator only
    assert [step.metrics.prompt_tokens for step in steps] == [900 + 500, 900]
    assert [step.metrics.completion_tokens for step in steps] == [240 + 20, 240]
    assert [[call.function_name for call in step.tool_calls] for step in steps] == [
        ["bash_command", "mark_task_complete"],
        ["mark_task_complete"],
    ]
    assert "Are you sure" in steps[0].observation.results[0].content
    context = result(job, "hello-file")["agent_result"]
    assert read.final_metrics.total_prompt_tokens == context["n_input_tokens"] == 2 * 900 + 500
    assert read.final_metrics.total_completion_tokens == context["n_output_tokens"]
    assert read.final_metrics.total_steps == 3


def test_the_selectors_tokens_are_booked_under_the_selectors_model(job: Path) -> None:
    usage = result(job, "hello-file")["agent_result"]["model_usage"]
    # two turns of the generator's, one selector call (echo and printf differed)
    assert usage == {
        "openai/stub": {
            "n_input_tokens": 2 * 900, "n_cache_tokens": 0, "n_output_tokens": 2 * 240,
            "cost_usd": None,
        },
        SELECTOR_MODEL: {
            "n_input_tokens": 500, "n_cache_tokens": 0, "n_output_tokens": 20,
            "cost_usd": None,
        },
    }  # fmt: skip
    # a turn the candidates agreed on asks no selector: its model is not booked
    greeting = result(job, "greeting-file")["agent_result"]["model_usage"]
    assert list(greeting) == ["openai/stub"]


def test_an_agent_timeout_leaves_the_trajectory_so_far(job: Path) -> None:
    prompt, step = trajectory(job, "slow-task").steps
    assert prompt.source == "user"
    assert step.observation is None  # cancelled while its command ran
    assert step.tool_calls[0].arguments["keystrokes"] == "sleep 60\n"
    assert step.metrics.prompt_tokens == 900


def test_no_key_reaches_a_record(job: Path) -> None:
    key = harbor_env()["OPENAI_API_KEY"]
    for path in job.rglob("*"):
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path


def turnbon_report(job: Path, out: Path) -> str:
    """`turnbon report JOB` as a user runs it: the report's Markdown."""
    done = subprocess.run(
        [str(BIN / "turnbon"), "report", str(job), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return (out / "report.md").read_text()


def test_turnbon_report_reads_the_job_folder(job: Path, tmp_path: Path) -> None:
    report = turnbon_report(job, tmp_path)
    # 1 of 3 passed: hello-file; greeting-file wrong, slow-task out of time
    assert "| N=4 | 3 | 1 | 33.3% |" in report
    assert "| Settings | N=4 |" in report and "| Model | `openai/stub` |" in report
    assert f"| Selector | `llm:{SELECTOR_MODEL}` |" in report
    assert "| Episodes | 3 of 3 trials (Harbor finished the job) |" in report
    assert "Partial" not in report and "turnbon bench" not in report
    table1 = report.split("## Cost (Table 1)")[1].split("\n## ")[0]
    # per attempt: turns (2 + 2 + 1) / 3; output tokens of the generator, 240 a turn:
    # (480 + 480 + 240) / 3, and of the selector, 20 / 3
    assert f"| N=4 | 3 | 1.7 | 400 | 7 | {DASH} |" in table1  # no baseline


@pytest.mark.parametrize(
    ("options", "key", "said"),
    [
        (["--ak", "nn=4"], True, "unknown option(s) nn"),
        ([], False, "needs OPENAI_API_KEY, which is not set"),
    ],
    ids=["unknown option", "no key"],
)
def test_a_mistake_is_refused_before_any_container_starts(
    options: list[str], key: bool, said: str, tmp_path: Path
) -> None:
    done = harbor(
        "run", "-p", str(TASKS / "hello-file"), "-e", "podman", "-a",
        "turnbon_harbor:TurnBoNAgent", "-m", "openai/stub", *options, "-y",
        "-o", str(tmp_path / "jobs"), key=key, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert said in " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "jobs").exists()


@pytest.fixture(scope="module")
def oracle_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of Harbor's oracle agent (it runs each task's solution): no model, no N."""
    needs_podman()
    jobs = tmp_path_factory.mktemp("oracle-jobs")
    done = harbor(
        "run", "-p", str(TASKS), "-e", "podman", "-a", "oracle", "-o", str(jobs),
        "--job-name", "oracle", "-n", "3", "-y", cwd=jobs,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return jobs / "oracle"


def test_turnbon_report_of_an_oracle_job_invents_no_setting(
    oracle_job: Path, tmp_path: Path
) -> None:
    report = turnbon_report(oracle_job, tmp_path)
    assert "| Settings | oracle |" in report
    assert "| Model | oracle: no model |" in report
    assert "| Episodes | 3 of 3 trials (Harbor finished the job) |" in report
    assert "Partial" not in report and "turnbon bench" not in report
    assert "| oracle | 3 | 3 | 100.0% |" in report  # the solutions pass their tests


def a_totals() -> Any:
    from turnbon_harbor.turn_log import TurnTotals

    return TurnTotals(N, "llm:openai/stub", model="openai/stub")


async def test_a_turns_file_that_cannot_be_written_is_logged_and_the_trial_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from turnbon_harbor.turn_log import TurnFile

    path = tmp_path / "agent" / "turns.jsonl"
    path.mkdir(parents=True)  # in the file's way (a read-only folder binds no root)
    turns = TurnFile(path)
    await turns.chosen({"turn_id": "t1"})
    with caplog.at_level("WARNING"):
        await turns.observed("$ ls")  # no exception: the turn goes on
    assert "could not write turn t1" in caplog.text and "goes on" in caplog.text
    path.rmdir()
    await turns.chosen({"turn_id": "t2"})
    await turns.close()
    assert [json.loads(line)["record"]["turn_id"] for line in path.read_text().splitlines()] == [
        "t2"
    ]


async def test_a_trajectory_that_cannot_be_written_is_logged_and_the_trial_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from harbor.models.trajectories import Agent

    from turnbon_harbor.trajectory import TrajectoryFile

    path = tmp_path / "trajectory.json"
    (path / "in-the-way").mkdir(parents=True)  # replacing it fails, as a full disk would
    agent = Agent(name="turnbon", version="0", model_name="openai/stub")
    trajectory = TrajectoryFile(path, agent, a_totals(), "session")
    with caplog.at_level("WARNING"):
        await trajectory.prompt("the task")  # no exception: the trial goes on
    assert "could not write the trajectory" in caplog.text
    assert os.listdir(tmp_path) == ["trajectory.json"]  # no temporary file left
    (path / "in-the-way").rmdir()
    path.rmdir()
    await trajectory.observed("nothing yet")  # a user step: nothing to add, still written
    await trajectory.write()
    assert json.loads(path.read_text())["steps"][0]["message"] == "the task"


def test_the_selectors_usage_is_booked_under_its_own_model() -> None:
    from harbor.models.agent.context import AgentContext

    from turnbon_graph.records import TurnRecord, Usage, UsageSplit
    from turnbon_harbor.turn_log import TurnTotals

    totals = TurnTotals(N, "llm:openai/judge", model="openai/stub", selector_model="openai/judge")
    record = TurnRecord.model_construct(
        usage=UsageSplit(
            generator=Usage(calls=1, prompt_tokens=900, completion_tokens=240, cost_usd=0.5),
            selector=Usage(calls=1, prompt_tokens=500, completion_tokens=20, cost_usd=0.25),
        )
    )
    totals.add(record)
    context = AgentContext()
    totals.fill(context)
    assert context.model_usage is not None
    usage = {m: u.model_dump() for m, u in context.model_usage.items()}
    assert usage == {
        "openai/stub": {
            "n_input_tokens": 900, "n_cache_tokens": 0, "n_output_tokens": 240, "cost_usd": 0.5,
        },
        "openai/judge": {
            "n_input_tokens": 500, "n_cache_tokens": 0, "n_output_tokens": 20, "cost_usd": 0.25,
        },
    }  # fmt: skip
    assert context.n_input_tokens == 1400  # Harbor's totals: both
    # the default selector, on the generator's model: one entry, both summed
    same = TurnTotals(N, "llm:openai/stub", model="openai/stub", selector_model="openai/stub")
    same.add(record)
    same.fill(context)
    assert context.model_usage is not None
    assert context.model_usage["openai/stub"].n_input_tokens == 1400
    assert list(context.model_usage) == ["openai/stub"]


def test_the_selectors_model_is_the_one_its_calls_go_to() -> None:
    from turnbon_graph.selectors import EnsembleSelector, FirstSelector, LLMSelector
    from turnbon_harbor.turn_log import selector_model

    assert selector_model(LLMSelector("openai/judge")) == "openai/judge"
    assert selector_model(FirstSelector()) is None
    judges = [LLMSelector("openai/a"), LLMSelector("openai/a")]
    assert selector_model(EnsembleSelector(judges)) == "openai/a"
    assert selector_model(EnsembleSelector([LLMSelector("a/x"), LLMSelector("b/y")])) is None

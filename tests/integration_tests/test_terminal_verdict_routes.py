"""Routes that misfiled a verdict, each through `turnbon run` or `turnbon bench` with a
stub model that plays the agent: bytecode in the work folder never runs in the
verifier; a named pipe, a hang, `os._exit(3)` or `os._exit(4)` is the deliverable's FAIL
(never an `agent_error`, so `--redo-errors` never draws it again); what the tests write
counts against the episode's storage, not the host's disk."""

from __future__ import annotations

import base64
import json
import os
import py_compile
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import runs_once
from tests.integration_tests.test_terminal_environment import spec, write_task
from tests.integration_tests.test_terminal_sandbox import shared_tmp  # noqa: F401 (a fixture)
from tests.integration_tests.test_terminal_verdict import TASK, TESTS, answer, plant
from turnbon_graph.bench.episode import verdict_outcome
from turnbon_graph.bench.running.runs import EPISODES_FILE, read_episodes
from turnbon_graph.cli import main
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment
from turnbon_terminal.result import CommandResult
from turnbon_terminal.verdict.tamper import Watched
from turnbon_terminal.verdict.verifier import verdict_of

ROOT = os.geteuid() == 0
MIB = 1 << 20


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-verifier-routes")


def turnbon_run(
    folder: Path, stub: StubServer, commands: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """`turnbon run FOLDER` whose one agent turn runs `commands`: (exit code, output)."""
    stub.script(runs_once(commands))
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "1", "--selector", "first"]
    code = main(["run", str(folder), *model])
    out = capsys.readouterr().out
    assert "[exit code 0]" in out, f"the agent's commands did not run: {out}"
    return code, out


def bench_command(folder: Path, stub: StubServer, run: Path) -> list[str]:
    """`turnbon bench` on the tasks of `folder`, one episode each, into `run`."""
    return ["bench", "--tasks", str(folder), "--model", "openai/m", "--api-base",
            stub.base_url, "--n", "1", "--selector", "first", "--run", str(run)]  # fmt: skip


def verdict_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Verdict:"))


# ------------------------------------------------------------------- bytecode

HELPER_TESTS = """
import subprocess
import sys

WORKDIR = __import__("os").environ["TASK_WORKDIR"]


def test_the_helper_knows_the_answer() -> None:
    sys.path.insert(0, WORKDIR)
    import helper

    assert helper.answer() == 42


def test_the_helper_in_a_python_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import helper; print(helper.answer())"],
        cwd=WORKDIR, capture_output=True, text=True,
    )
    assert done.stdout.strip() == "42", done.stderr
"""
HONEST_LOOKING = 'def answer():\n    return "I do not know it"\n'


def forged_bytecode(tmp_path: Path) -> str:
    """Bytecode of a helper that knows the answer, hash-based and never checked against
    its source (so Python runs it whatever helper.py says), as base64."""
    source = tmp_path / "helper.py"
    source.write_text("def answer():\n    return 42\n")
    compiled = py_compile.compile(
        str(source),
        cfile=str(tmp_path / "helper.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return base64.b64encode(Path(compiled).read_bytes()).decode()


def write_bytes(path: str, encoded: str) -> str:
    return f'mkdir -p "$(dirname {path})"; echo {encoded} | base64 -d > {path}\n'


BYTECODE = {
    "__pycache__ beside helper.py": "bytecode with an unchecked hash",
    "a lone helper.pyc": "bytecode outside __pycache__",
}
"""Where the forged bytecode goes, and the evidence the verifier records of it."""


@pytest.mark.parametrize("where", list(BYTECODE))
def test_bytecode_in_the_work_folder_never_runs_in_the_verifier(
    where: str,
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    forged = forged_bytecode(tmp_path)
    if where.startswith("__pycache__"):
        tag = sys.implementation.cache_tag  # the verifier runs this Python's base
        commands = plant("helper.py", HONEST_LOOKING)
        commands += write_bytes(f"__pycache__/helper.{tag}.pyc", forged)
    else:
        commands = write_bytes("helper.pyc", forged)
    folder = write_task(tmp_path / "task", "helper", HELPER_TESTS)
    code, out = turnbon_run(folder, stub, commands, capsys)
    # Before: PASS, the bytecode ran while the source said it does not know.
    assert "Verdict: FAIL" in out and code == 1, out
    assert "verifier error" not in verdict_line(out), out
    assert f"Tamper evidence:\n  - {BYTECODE[where]}" in out, out


def test_the_honest_helper_with_its_own_bytecode_still_passes(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = plant("helper.py", "def answer():\n    return 42\n")
    commands += "python3 -c 'import helper' && ls __pycache__\n"  # an ordinary cache
    folder = write_task(tmp_path, "helper", HELPER_TESTS)
    code, out = turnbon_run(folder, stub, commands, capsys)
    assert "helper.cpython-" in out, out
    assert "Verdict: PASS" in out and code == 0, out
    assert "Tamper evidence" not in out, out  # a cache Python wrote for its source


# ------------------------------------------------- the deliverable's endings

ENDINGS = {
    "os._exit(3) at import": ("import os\nos._exit(3)\n", "(exit code 3)"),
    "os._exit(4) when called": (
        "import os\n\n\ndef answer():\n    os._exit(4)\n",
        "(exit code 4)",
    ),
    "pytest.exit(returncode=3) when called": (
        "import pytest\n\n\ndef answer():\n    pytest.exit('bye', returncode=3)\n",
        "pytest exited with code 3 (internal error)",
    ),
    "sleeps forever": (
        "import time\n\n\ndef answer():\n    time.sleep(10**6)\n",
        "the tests did not finish within",
    ),
}


@pytest.mark.parametrize("route", list(ENDINGS))
def test_an_ending_the_deliverable_caused_is_a_fail_not_an_error(
    route: str,
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module, reason = ENDINGS[route]
    folder = write_task(tmp_path, TASK, TESTS, verifier_timeout=12)
    code, out = turnbon_run(folder, stub, answer(42, module), capsys)
    line = verdict_line(out)
    # Before: "Verdict: FAIL (verifier error: ...)", an agent_error.
    assert line.startswith("Verdict: FAIL (") and "verifier error" not in line, out
    assert reason in line, line
    assert code == 1


RIGHT_MODULE = plant("answer.py", "def answer():\n    return 42\n")
FIFO = "mkfifo out.txt\n" + RIGHT_MODULE
UNREADABLE = {
    "a named pipe": (FIFO, "the verifier refused to open out.txt (a named pipe)"),
    "a link to a device": (
        "ln -s /dev/zero out.txt\n" + RIGHT_MODULE,
        "the verifier refused to open out.txt (a character device)",
    ),
    "a file its user cannot read": (
        "echo 42 > out.txt; chmod 000 out.txt\n" + RIGHT_MODULE,
        "the work folder holds out.txt (not readable)",
    ),
}


@pytest.mark.parametrize("what", list(UNREADABLE))
async def test_what_the_tests_cannot_read_fails_at_once_with_a_reason(
    what: str, tmp_path: Path
) -> None:
    commands, reason = UNREADABLE[what]
    write_task(tmp_path, TASK, TESTS, verifier_timeout=60)
    env = TerminalEnvironment(tmp_path)
    run = await env.start(spec(env, TASK), 0)
    try:
        assert (await run.run(commands)).ok
        verdict = await run.verify()
    finally:
        await run.close()
    # Before: a 58 s wait and an agent_error (the pipe), or no reason at all.
    assert not verdict.passed and verdict.error is None, verdict
    assert verdict.reason == reason, verdict
    assert "1 failed, 1 passed" in verdict.output  # at once, not at the time limit


def test_redo_errors_never_draws_a_deliverables_failure_again(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = write_task(tmp_path / "tasks", TASK, TESTS, verifier_timeout=20)
    stub.script(runs_once(FIFO))
    run = tmp_path / "run"
    bench = bench_command(folder, stub, run)
    main(bench)
    capsys.readouterr()
    [first] = read_episodes(run)
    # Before: agent_error ("verifier: the verifier timed out"), drawn again below.
    assert first.outcome == "wrong_submission", first.error
    assert first.error is not None and "named pipe" in first.error
    asked = len(stub.requests)

    assert main([*bench, "--redo-errors"]) == 0
    out = capsys.readouterr().out
    assert "nothing to run" in out, out
    assert len(stub.requests) == asked
    lines = (run / EPISODES_FILE).read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in lines] == ["wrong_submission"]


# ------------------------------------------------------------------ storage

GREEDY = textwrap.dedent("""\
    import os


    def answer():
        chunk = b"x" * (1 << 20)
        with open(os.path.join(WHERE, "big"), "wb") as handle:
            for _ in range(301):
                try:
                    handle.write(chunk)
                    handle.flush()
                except OSError:
                    break
        return 42
""")
"""A deliverable that writes 301 MB into `WHERE` while the tests run, and answers."""
WRITTEN = {
    "HOME": ('os.environ["HOME"]', "storage_mb = 64\n", "storage_mb = 64"),
    "/tmp": ('"/tmp"', "memory_mb = 128\n", "memory_mb = 128"),
}
"""Where it writes, the budget it is given, and what the reason names."""


def host_bytes(folder: Path) -> int:
    """Disk blocks the files below `folder` hold on the host's file system (what a file
    system mounted below it holds is not the host's; its image file is)."""
    total = 0
    for place, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(place, d))]
        for name in files:
            total += os.lstat(os.path.join(place, name)).st_blocks * 512
    return total


@pytest.mark.skipif(not ROOT, reason="budgets are enforced as root only")
@pytest.mark.parametrize("where", list(WRITTEN))
async def test_what_the_tests_write_counts_against_the_episodes_budget(
    where: str, tmp_path: Path
) -> None:
    target, budget, named = WRITTEN[where]
    folder = write_task(tmp_path, TASK, TESTS, verifier_timeout=60)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + f"\n[environment]\n{budget}")
    env = TerminalEnvironment(tmp_path)
    run = await env.start(spec(env, TASK), 0)
    try:
        assert (await run.run(answer(42, GREEDY.replace("WHERE", target)))).ok
        verdict = await run.verify()
        held = host_bytes(run.sandbox.root)
    finally:
        await run.close()
    # Before: HOME's 301 MB on the host's disk and a PASS; /tmp's a FAIL without the why.
    assert held < 80 * MIB, f"{held // MIB} MiB reached the host's disk"
    assert not verdict.passed and verdict.error is None, verdict
    assert verdict.reason is not None and named in verdict.reason, verdict
    assert verdict.reason.startswith("the tests went over the episode's budget: ")


# ------------------------------------------------- the taxonomy, case by case

REPORT = (
    b'<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="1">'
    b'<testcase classname="t" name="a"/></testsuite></testsuites>'
)


def ran(code: int, **flags: bool) -> CommandResult:
    return CommandResult(output="bwrap: Can't mount proc\n", exit_code=code, timeout=9, **flags)


@pytest.mark.parametrize("result", [ran(1), ran(-9, timed_out=True)], ids=["exited", "timed out"])
def test_tests_that_never_started_are_the_verifiers_error(result: CommandResult) -> None:
    verdict = verdict_of(result, None, Watched())
    assert not verdict.passed and verdict.reason is None
    assert verdict.error is not None and verdict.error.startswith("the tests never started (")
    assert verdict.error.endswith("): bwrap: Can't mount proc")
    assert verdict_outcome(verdict)[0] == "agent_error"


@pytest.mark.parametrize(
    ("watched", "reason"),
    [
        (Watched(started=True), "the test process ended before pytest returned (exit code 0)"),
        (Watched(started=True, returned=1), "pytest returned 1 but the test process exited 0"),
        (Watched(started=True, returned=0), None),
    ],
    ids=["never returned", "another exit code", "returned 0"],
)
def test_a_clean_report_passes_only_when_pytest_returned_0(
    watched: Watched, reason: str | None
) -> None:
    verdict = verdict_of(ran(0), REPORT, watched)
    assert verdict.passed == (reason is None) and verdict.reason == reason
    assert verdict.error is None
    assert verdict_outcome(verdict)[0] == ("pass" if reason is None else "wrong_submission")


async def test_the_verifiers_python_and_cache_are_ready_when_the_first_episode_starts(
    shared_tmp: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    # So that no verification's own time goes to them (a short verifier timeout on a
    # cold work root would otherwise be spent filling the cache).
    write_task(shared_tmp / "tasks", TASK, TESTS)
    env = TerminalEnvironment(shared_tmp / "tasks", work_root=shared_tmp / "root")
    run = await env.start(spec(env, TASK), 0)
    try:
        caches = list((shared_tmp / "root").glob("pycache-*"))
        assert len(caches) == 1 and any(caches[0].rglob("*.pyc")), caches
        assert (await run.run(answer(42))).ok
        assert (await run.verify()).passed
    finally:
        await run.close()

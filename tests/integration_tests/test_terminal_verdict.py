"""A verdict the agent cannot forge: each way of making the verifier's pytest exit 0 on a
wrong answer gives FAIL (with the reason where there is one), a right answer still gives
PASS, planted hooks or not; and the report check on hand-written JUnit XML."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.helpers import runs_once
from tests.integration_tests.test_terminal_environment import spec, write_task
from turnbon_graph.bench.environment import Verdict
from turnbon_graph.cli import main
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment, TerminalEpisode
from turnbon_terminal.result import CommandResult
from turnbon_terminal.verdict.verifier import (
    REPORT_CAP,
    ReportError,
    Tally,
    VerifierPython,
    read_report,
    tally_of,
    verdict_of,
)

TASK = "answer"
TESTS = """
import importlib.util
import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_the_answer_file() -> None:
    assert (WORKDIR / "out.txt").read_text().strip() == "42"


def test_the_answer_module() -> None:
    spec = importlib.util.spec_from_file_location("answer_under_test", WORKDIR / "answer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.answer() == 42
"""


def answer(value: int, module: str | None = None) -> str:
    """Shell that writes out.txt and answer.py (`module`, or one returning `value`)."""
    body = module if module is not None else f"def answer():\n    return {value}\n"
    return f"echo {value} > out.txt\n" + plant("answer.py", body)


def plant(path: str, content: str) -> str:
    """Shell that writes `content` to `path` (its folders made)."""
    return f'mkdir -p "$(dirname "{path}")"\ncat > "{path}" <<\'PLANTED\'\n{content}PLANTED\n'


EXIT = "import os\nos._exit(0)\n"
FAKE_PYTEST = (
    "import os\n\n\ndef main(*args, **kwargs):\n    os._exit(0)\n\n\nconsole_main = main\n"
)
FORGE = textwrap.dedent("""\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome = "passed"
        report.longrepr = None
""")
"""A plugin that reports every test as passed: a well-formed, all-pass report."""


def hooks(site: str) -> dict[str, str]:
    """Each planted hook that would run in a careless verifier, as shell; `site` is the
    user site the verifier's Python reads with HOME the working directory."""
    ini = "[pytest]\naddopts = -p forge\n"
    return {
        "pth in the user site": plant(f"{site}/zz.pth", "import os; os._exit(0)\n"),
        "usercustomize in the user site": plant(f"{site}/usercustomize.py", EXIT),
        "sitecustomize in the user site": plant(f"{site}/sitecustomize.py", EXIT),
        "sitecustomize in the workdir": plant("sitecustomize.py", EXIT),
        "pytest package in the user site": plant(f"{site}/pytest/__init__.py", FAKE_PYTEST)
        + plant(f"{site}/pytest/__main__.py", EXIT),
        "pytest package in the workdir": plant("pytest/__init__.py", FAKE_PYTEST)
        + plant("pytest/__main__.py", EXIT),
        "pytest.py in the workdir": plant("pytest.py", FAKE_PYTEST + EXIT),
        "conftest.py in the workdir": plant("conftest.py", FORGE),
        "pytest.ini": plant("forge.py", FORGE) + plant("pytest.ini", ini),
        "pyproject.toml": plant("forge.py", FORGE)
        + plant("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p forge"\n'),
        "setup.cfg": plant("forge.py", FORGE)
        + plant("setup.cfg", "[tool:pytest]\naddopts = -p forge\n"),
        "tox.ini": plant("forge.py", FORGE) + plant("tox.ini", ini),
    }


ENDS_AT_START = {"pth in the user site", "usercustomize in the user site"}
"""Hooks that end any Python started plainly (no -I, HOME the workdir) before it runs a
line: checked live in the agent's sandbox. The others need more (a user-site
sitecustomize.py, a system without one of its own; the rest, the working directory on
sys.path, or pytest reading the agent's ini files), so only the verdict is checked."""

DELIVERABLES = {
    "os._exit(0) at import": (EXIT, "no structured report: the test process ended"),
    "atexit os._exit(0)": (
        "import atexit, os\natexit.register(os._exit, 0)\n\n\ndef answer():\n    return 41\n",
        "the report says 2 failed but pytest exited 0",
    ),
    "os._exit(0) when called": (
        "import os\n\n\ndef answer():\n    os._exit(0)\n",
        "no structured report: the test process ended",
    ),
}
"""A deliverable the test imports that ends the process, and the reason it gets."""


@asynccontextmanager
async def episode(root: Path, **options: object) -> AsyncIterator[TerminalEpisode]:
    await asyncio.to_thread(write_task, root, TASK, TESTS)
    env = TerminalEnvironment(root, **options)  # type: ignore[arg-type]
    started = await env.start(spec(env, TASK), 0)
    try:
        yield started
    finally:
        await started.close()


async def verifier_python(run: TerminalEpisode) -> tuple[str | None, str]:
    """The verifier's Python if the agent's sandbox sees it too (a system one), and the
    user site folder it would read were HOME the workdir."""
    candidate = (await VerifierPython().resolve(run.sandbox)).candidate
    probe = await asyncio.to_thread(
        subprocess.run,
        [candidate.python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    home = run.sandbox.inside(run.workdir)  # the workdir as the sandbox sees it
    site = f"{home}/.local/lib/python{probe.stdout.strip()}/site-packages"
    return (candidate.python if candidate.prefix is None else None), site


async def user_site(run: TerminalEpisode) -> str:
    return (await verifier_python(run))[1]


async def verdict_after(root: Path, commands: str, **options: object) -> Verdict:
    """The verdict on the working directory `commands` (with the user site as $SITE)
    leave."""
    async with episode(root, **options) as run:
        done = await run.run(commands.replace("$SITE", await user_site(run)))
        assert done.ok, done.render()
        return await run.verify()


def plain_failure(verdict: Verdict) -> bool:
    """pytest ran both tests and they failed: no hook cut it short or forged it."""
    return verdict.reason is None and verdict.error is None and "2 failed" in verdict.output


@pytest.mark.parametrize("route", list(hooks("$SITE")))
async def test_a_planted_hook_with_a_wrong_answer_fails(tmp_path: Path, route: str) -> None:
    async with episode(tmp_path) as run:
        python, site = await verifier_python(run)
        assert (await run.run(answer(41) + hooks(site)[route])).ok
        if route in ENDS_AT_START and python is not None:
            # The hook is live: that Python started plainly, HOME the workdir, ends at once.
            plain = await run.run(f"{python} -c 'print(\"alive\")'")
            assert plain.exit_code == 0 and "alive" not in plain.output, plain.render()
        verdict = await run.verify()
    assert not verdict.passed, verdict
    # The tests ran and failed: the hook never ran in the verifier.
    assert plain_failure(verdict), verdict


@pytest.mark.parametrize("route", list(DELIVERABLES))
async def test_a_deliverable_that_ends_the_test_process_fails(tmp_path: Path, route: str) -> None:
    module, reason = DELIVERABLES[route]
    verdict = await verdict_after(tmp_path, answer(41, module))
    assert not verdict.passed and verdict.error is None, verdict
    assert verdict.reason is not None and reason in verdict.reason, verdict
    if "no structured report" in reason:
        assert verdict.reason.endswith("(exit code 0)")


async def test_a_right_answer_passes(tmp_path: Path) -> None:
    verdict = await verdict_after(tmp_path, answer(42))
    assert verdict.passed and verdict.reason is None and verdict.error is None, verdict
    assert "2 passed" in verdict.output


async def test_a_right_answer_among_every_planted_hook_still_passes(tmp_path: Path) -> None:
    planted = "".join(hooks("$SITE").values())
    verdict = await verdict_after(tmp_path, answer(42) + planted)
    assert verdict.passed, verdict
    assert "2 passed" in verdict.output


async def test_the_tests_see_the_workdir_only_as_task_workdir(tmp_path: Path) -> None:
    probe = """
        import os
        import sys
        from pathlib import Path

        def test_where() -> None:
            workdir = os.environ["TASK_WORKDIR"]
            assert (Path(workdir) / "out.txt").read_text() == "42\\n"
            assert os.environ["HOME"] != workdir and not os.listdir(os.environ["HOME"])
            assert os.getcwd() != workdir
            assert not any(p and Path(p).resolve() == Path(workdir) for p in sys.path)
            assert sys.flags.isolated and sys.flags.no_user_site
    """
    await asyncio.to_thread(write_task, tmp_path, "where", probe)
    env = TerminalEnvironment(tmp_path)
    run = await env.start(spec(env, "where"), 0)
    try:
        await run.run("echo 42 > out.txt; mkdir -p .local; touch .bashrc")
        verdict = await run.verify()
    finally:
        await run.close()
    assert verdict.passed, verdict.output


@pytest.mark.filterwarnings("ignore:turnbon_terminal. sandbox='uid' is the weak fallback")
@pytest.mark.parametrize(
    ("commands", "passed", "reason"),
    [
        (answer(42) + "".join(hooks("$SITE").values()), True, None),
        (answer(41) + hooks("$SITE")["pth in the user site"], False, None),
        (answer(41, DELIVERABLES["atexit os._exit(0)"][0]), False, "2 failed but pytest exited 0"),
    ],
    ids=["right answer among the hooks", "pth", "atexit"],
)
async def test_the_uid_fallback_gives_the_same_verdicts(
    tmp_path: Path, commands: str, passed: bool, reason: str | None
) -> None:
    # Without bwrap the tests run on the host: HOME and the report folder are ours all
    # the same, and -I keeps the user site out.
    verdict = await verdict_after(tmp_path, commands, sandbox="uid")
    assert verdict.passed == passed and verdict.error is None, verdict
    if reason is None:
        assert verdict.reason is None and ("2 passed" if passed else "2 failed") in verdict.output
    else:
        assert verdict.reason is not None and reason in verdict.reason, verdict


# ------------------------------------------------------------- through `turnbon run`


def cli_task(root: Path, solve: str) -> Path:
    folder = write_task(root, TASK, TESTS)
    (folder / "solution" / "solve.sh").write_text(solve)
    return folder


async def _site_of(root: Path) -> str:
    """The user site as a path below HOME (the workdir, as the agent sees it), for solve.sh."""
    async with episode(root) as run:
        return (await user_site(run)).removeprefix(str(run.sandbox.inside(run.workdir)) + "/")


def run_cli(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    """`turnbon run FOLDER --model stub --keep-workdir`: (exit code, output, kept copy)."""
    options = ["--model", "stub", "-n", "4", "--max-turns", "4", "--seed", "3"]
    code = main(["run", str(folder), *options, "--keep-workdir"])
    out = capsys.readouterr().out
    found = re.search(r"Working copy kept: (\S+) ", out)
    assert found is not None, out
    return code, out, Path(found.group(1))


def test_turnbon_run_fails_a_planted_hook_and_passes_the_honest_solution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = asyncio.run(_site_of(tmp_path / "probe"))
    hook = plant(f"$HOME/{site}/zz.pth", "import os; os._exit(0)\n")
    kept: list[Path] = []
    try:
        attacked = cli_task(tmp_path / "attack", answer(41) + hook)
        code, out, copy = run_cli(attacked, capsys)
        kept.append(copy)
        assert (copy / site / "zz.pth").is_file(), "the stub never ran solve.sh"
        assert "Verdict: FAIL" in out and code == 1, out

        honest = cli_task(tmp_path / "honest", answer(42))
        code, out, copy = run_cli(honest, capsys)
        kept.append(copy)
        assert "Verdict: PASS" in out and code == 0, out
    finally:
        for copy in kept:
            shutil.rmtree(copy.parent, ignore_errors=True)


# ------------------------------------------------------------- the report check

CASE = '<testcase classname="test_a" name="test_{n}" time="0.001"{body}'
PASSED, FAILED = "/>", '><failure message="assert 0">E assert 0</failure></testcase>'
SKIPPED = '><skipped type="pytest.skip" message="skip">skip</skipped></testcase>'
XFAILED = '><skipped type="pytest.xfail" message="" /></testcase>'
ERRORED = '><error message="failed on teardown">E RuntimeError</error></testcase>'


def junit(*bodies: str, **counts: int) -> bytes:
    """A report like pytest's of cases with these bodies; counts as they say, unless
    given."""
    real = {
        "errors": sum(b == ERRORED for b in bodies),
        "failures": sum(b == FAILED for b in bodies),
        "skipped": sum(b in (SKIPPED, XFAILED) for b in bodies),
        "tests": len(bodies),
    }
    real.update(counts)
    attrs = " ".join(f'{k}="{v}"' for k, v in real.items())
    cases = "".join(CASE.format(n=n, body=b) for n, b in enumerate(bodies))
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        f'<testsuite name="pytest" {attrs} time="0.1">{cases}</testsuite></testsuites>'
    ).encode()


def ran(code: int, **flags: bool) -> CommandResult:
    return CommandResult(output="pytest's output", exit_code=code, timeout=30, **flags)


def test_exit_code_0_and_a_report_of_passed_tests_is_a_pass() -> None:
    verdict = verdict_of(ran(0), junit(PASSED, PASSED))
    assert verdict.passed and verdict.reason is None and verdict.error is None
    assert "pytest's output" in verdict.output


@pytest.mark.parametrize(
    ("code", "report", "reason"),
    [
        (
            0,
            None,
            "no structured report: the test process ended before pytest wrote it (exit code 0)",
        ),
        (
            -9,
            None,
            "no structured report: the test process ended before pytest wrote it "
            "(killed by SIGKILL)",
        ),
        (0, junit(PASSED, PASSED)[:150], "the structured report is truncated or not XML"),
        (0, b"", "the structured report is truncated or not XML"),
        (5, junit(), "no test was collected (exit code 5)"),
        (0, junit(), "no test was collected (exit code 0)"),
        (
            0,
            junit(PASSED, tests=3),
            "counts (tests=3, failures=0, errors=0, skipped=0) disagree with the 1 test case(s)",
        ),
        (0, junit(PASSED, FAILED, failures=0), "disagree with the 2 test case(s)"),
        (1, junit(PASSED, FAILED, tests=5), "disagree"),
        (
            0,
            junit(PASSED, SKIPPED),
            "the report says 1 passed, 1 skipped: a skipped or xfailed test is not a passed one",
        ),
        (0, junit(XFAILED), "the report says 1 skipped"),
        (1, junit(PASSED, PASSED, PASSED), "the report says 3 passed but pytest exited 1"),
        (0, junit(PASSED, FAILED), "the report says 1 passed, 1 failed but pytest exited 0"),
        (0, junit(ERRORED), "the report says 1 error but pytest exited 0"),
        (-9, junit(FAILED), "the report says 1 failed but pytest was killed by SIGKILL"),
        (0, b"<html><body/></html>", "holds no <testsuite>: it is not pytest's"),
        (0, b'<testsuite name="x"><testcase name="t"/></testsuite>', "lacks its counts"),
        (0, b"<a>" + b" " * REPORT_CAP + b"</a>", "over 16 MiB"),
    ],
)
def test_anything_short_of_a_clean_report_is_a_fail_with_its_reason(
    code: int, report: bytes | None, reason: str
) -> None:
    verdict = verdict_of(ran(code), report)
    assert not verdict.passed and verdict.error is None
    assert verdict.reason is not None and reason in verdict.reason, verdict.reason


@pytest.mark.parametrize(
    ("code", "report"),
    [(1, junit(PASSED, FAILED)), (2, junit(ERRORED)), (1, junit(PASSED, FAILED, ERRORED, tests=2))],
)
def test_a_plain_failure_has_no_reason(code: int, report: bytes) -> None:
    verdict = verdict_of(ran(code), report)
    assert not verdict.passed and verdict.reason is None and verdict.error is None


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (ran(-9, timed_out=True), "the tests did not finish within 30.0 s"),
        (ran(-9, flooded=True), "the tests' output passed the hard limit"),
        (ran(3), "pytest exited with code 3 (internal error); the report says 1 passed"),
        (ran(4), "pytest exited with code 4 (usage error)"),
    ],
)
def test_how_the_tests_end_is_the_deliverables_fail(result: CommandResult, reason: str) -> None:
    verdict = verdict_of(result, junit(PASSED))  # the watch started: the tests ran
    assert not verdict.passed and verdict.error is None and reason in str(verdict.reason)


def test_the_tally_agrees_with_a_real_pytest_report(tmp_path: Path) -> None:
    (tmp_path / "test_mix.py").write_text(
        textwrap.dedent("""
        import pytest

        def test_ok(): pass
        def test_fail(): assert 0
        @pytest.mark.skip
        def test_skip(): pass
        @pytest.mark.xfail
        def test_xfail(): assert 0
        @pytest.mark.xfail
        def test_xpass(): pass
        @pytest.fixture
        def broken():
            yield
            raise RuntimeError
        def test_fail_then_teardown_error(broken): assert 0
        """)
    )
    report = tmp_path / "out" / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([*argv, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 1, done.stdout
    data = read_report(report)
    assert data is not None
    assert tally_of(data) == Tally(passed=2, failed=2, errors=1, skipped=2)
    assert verdict_of(ran(1), data).reason is None  # a plain failure


def test_a_report_that_is_not_a_regular_file_is_none(tmp_path: Path) -> None:
    secret = tmp_path / "secret.xml"
    secret.write_bytes(junit(PASSED))
    (tmp_path / "link.xml").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.xml")  # reading it would block the verifier
    assert read_report(tmp_path / "link.xml") is None
    assert read_report(tmp_path / "fifo.xml") is None
    assert read_report(tmp_path / "missing.xml") is None
    assert read_report(secret) == junit(PASSED)
    with pytest.raises(ReportError, match="truncated"):
        tally_of(junit(PASSED)[:-20])


# ------------------------------------------------ every route, through turnbon run


@pytest.fixture(scope="module")
def site_below_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    return asyncio.run(_site_of(tmp_path_factory.mktemp("probe")))


ROUTES = {
    **{name: answer(41) + hook for name, hook in hooks("$SITE").items()},
    **{name: answer(41, module) for name, (module, _) in DELIVERABLES.items()},
}


@pytest.mark.parametrize("route", [*ROUTES, "honest"])
def test_every_route_through_turnbon_run_fails_and_the_honest_answer_passes(
    route: str,
    site_below_home: str,
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-verdict")
    commands = ROUTES.get(route, answer(42)).replace("$SITE", f"$HOME/{site_below_home}")
    stub.script(runs_once(commands))
    folder = write_task(tmp_path, TASK, TESTS)
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "1", "--selector", "first"]
    code = main(["run", str(folder), *model])
    out = capsys.readouterr().out
    assert "[exit code 0]" in out, "the agent's commands did not run"
    if route == "honest":
        assert "Verdict: PASS" in out and code == 0, out
    else:
        assert "Verdict: FAIL" in out and code == 1, out

"""The verifier: the task's pytest tests, run after the agent in a sandbox of their own,
judged by pytest's own structured report (see docs/verifier.md).

Before it runs, every process of the episode is killed (`Sandbox.kill_all`), so nothing
the agent left running can touch what follows. The tests are then copied afresh to a
folder of ours (read-only to the episode's user) and run, under bwrap, in a new sandbox
that sees the working directory (at its own path, as `TASK_WORKDIR`), that copy, a copy
of pytest, an empty HOME and a report folder of ours, with an empty /tmp, a clean
environment, plugin autoloading off and no cache written.

The interpreter runs isolated (`python -I -B -c BOOTSTRAP`): no user site, no PYTHON*
variables, neither the working directory nor the current one on sys.path, so nothing
the agent wrote runs at start-up; the bootstrap puts the pytest copy first on sys.path.
It is this process's own Python if the sandbox can run it, else a system Python.

PASS needs exit code 0 and a JUnit XML report, written by pytest itself into the report
folder, in which at least one test ran and every test passed, with counts that agree:
a hook that ends the process early (`os._exit(0)`, at start-up, at import or at exit)
leaves no such report.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from turnbon_graph.bench.environment import Verdict
from turnbon_terminal.envvars import SAFE_PATH
from turnbon_terminal.junit import REPORT_CAP, ReportError, Tally, read_report, tally_of
from turnbon_terminal.pytest_site import pytest_site, readable_copy
from turnbon_terminal.result import signal_name
from turnbon_terminal.sandbox import CommandResult, Fresh, Sandbox
from turnbon_terminal.tasks import TerminalTask

__all__ = [
    "REPORT_CAP",
    "ReportError",
    "Tally",
    "VerifierPython",
    "read_report",
    "run_verifier",
    "tally_of",
    "verdict_of",
]

OUTPUT_TAIL = 4000
"""Characters of pytest's output kept in the verdict (its end: the summary)."""

INI_NAME = ".turnbon-pytest.ini"
REPORT_NAME = "junit.xml"

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import pytest; "
    "raise SystemExit(pytest.main())"
)
"""Run as `python -I -B -c BOOTSTRAP <pytest copy> <pytest args>`: with -I PYTHONPATH is
ignored, so the copy's folder comes as the first argument."""

_PROBE = "import sys; sys.path.insert(0, sys.argv.pop(1)); import pytest"
_EXIT_ERRORS = {3: "internal error", 4: "usage error"}
"""Exit codes that mean pytest itself could not run the tests: a verdict error."""


class VerifierUnavailableError(Exception):
    """No Python the sandbox user can run has pytest (reported as a verdict error)."""


@dataclass(frozen=True)
class _Candidate:
    python: str
    prefix: Path | None = None
    """Its installation, bound read-only when it is not below a system directory."""


class VerifierPython:
    """Finds, once, a Python that can run pytest in the verifier's sandbox."""

    def __init__(self, explicit: str | None = None) -> None:
        self._explicit = explicit
        self._found: tuple[_Candidate, Path] | None = None

    def _candidates(self) -> list[_Candidate]:
        if self._explicit:
            return [_candidate(self._explicit)]
        base = getattr(sys, "_base_executable", None) or sys.executable
        found = [_candidate(base)]
        seen = {os.path.realpath(base)}
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        for name in (f"python{version}", "python3"):
            path = shutil.which(name, path=SAFE_PATH)
            if path and os.path.realpath(path) not in seen:
                seen.add(os.path.realpath(path))
                found.append(_candidate(path))
        return found

    async def resolve(self, sandbox: Sandbox) -> tuple[_Candidate, Path]:
        """(interpreter, pytest's folder); raises VerifierUnavailableError."""
        if self._found is not None:
            return self._found
        site = await asyncio.to_thread(pytest_site, sandbox.host.work_root)
        problems = []
        for candidate in self._candidates():
            # HOME=/tmp: a fresh tmpfs under bwrap; the probe runs none of the agent's
            # code either way, and -I reads nothing from HOME.
            probe = await _in_fresh_sandbox(
                sandbox,
                candidate,
                site,
                _isolated(candidate, _PROBE, site),
                home=Path("/tmp"),
                time_limit=30,
            )
            lines = probe.output.strip().splitlines()
            if probe.ok:
                self._found = (candidate, site)
                return self._found
            problems.append(f"{candidate.python}: {lines[-1] if lines else probe.exit_code}")
        user = f"uid {sandbox.uid}" if sandbox.uid is not None else "the current user"
        raise VerifierUnavailableError(
            f"no Python with pytest that {user} can run in the sandbox "
            f"({'; '.join(problems)}): install python3 for the system (/usr/bin/python3), "
            "or pass verifier_python= to TerminalEnvironment"
        )


def _candidate(python: str) -> _Candidate:
    real = Path(os.path.realpath(python))
    system = any(Path(d) in real.parents for d in ("/usr", "/bin", "/lib"))
    return _Candidate(python, None if system else real.parents[1])


def _isolated(candidate: _Candidate, code: str, site: Path, *args: str) -> list[str]:
    """`code` run by an interpreter that runs nothing of the agent's at start-up: -I is
    no user site (no .pth or usercustomize from HOME), no PYTHON* variables and no
    script or current directory on sys.path; -B writes no bytecode."""
    return [candidate.python, "-I", "-B", "-c", code, str(site), *args]


async def _in_fresh_sandbox(
    sandbox: Sandbox,
    candidate: _Candidate,
    site: Path,
    argv: list[str],
    *,
    home: Path,
    time_limit: float,
    readonly: tuple[Path, ...] = (),
    writable: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    keep: int | None = None,
) -> CommandResult:
    prefix = (candidate.prefix,) if candidate.prefix is not None else ()
    return await sandbox.execute(
        argv,
        # PYTHONPATH only for Pythons the tests start themselves (the verifier's own
        # ignores it); HOME last, so it is never the agent's working directory.
        env={"PYTHONPATH": str(site), **(env or {}), "HOME": str(home)},
        time_limit=time_limit,
        cwd=cwd,
        keep=keep,
        fresh=Fresh(readonly=(*prefix, site, *readonly), writable=writable),
    )


@dataclass(frozen=True)
class _Folder:
    """The verifier's folder of ours: the tests (read-only), an empty HOME and the
    report folder (both the episode user's), all made after the agent's processes died."""

    tests: Path
    home: Path
    reports: Path


async def run_verifier(
    sandbox: Sandbox, task: TerminalTask, python: VerifierPython, time_limit: float
) -> Verdict:
    """Ends the episode's processes, then runs the task's tests against the working
    directory in a fresh sandbox; never raises for a failure."""
    if not await sandbox.kill_all():
        return Verdict(passed=False, error="processes of the episode survived being killed")
    folder = await asyncio.to_thread(_fresh_tests, sandbox, task.tests_dir)
    try:
        candidate, site = await python.resolve(sandbox)
    except VerifierUnavailableError as exc:
        return Verdict(passed=False, error=str(exc))
    tests, report = folder.tests, folder.reports / REPORT_NAME
    args = ["-q", "--tb=short", "--color=no", "-p", "no:cacheprovider", "-c", str(tests / INI_NAME)]
    args += ["--rootdir", str(tests), "--import-mode=importlib", f"--junitxml={report}"]
    result = await _in_fresh_sandbox(
        sandbox,
        candidate,
        site,
        _isolated(candidate, BOOTSTRAP, site, *args, str(tests)),
        home=folder.home,
        time_limit=time_limit,
        readonly=(tests,),
        writable=(folder.home, folder.reports),
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **task.verifier_env},
        cwd=tests,
        keep=64 * 1024,
    )
    # Outside bwrap (sandbox="uid") something the tests started could still be writing.
    await sandbox.kill_all()
    return verdict_of(result, await asyncio.to_thread(read_report, report))


def _fresh_tests(sandbox: Sandbox, source: Path) -> _Folder:
    """A copy of the task's tests the agent never saw: made after its processes ended,
    in a new folder of ours, read-only to the episode's user. Our own ini file: without
    one pytest would look upwards from the tests for one."""
    folder = Path(tempfile.mkdtemp(prefix="verify-", dir=sandbox.root))
    tests = folder / "tests"
    readable_copy(source, tests)
    ini = tests / INI_NAME
    ini.write_text("[pytest]\njunit_family = xunit2\n", encoding="utf-8")
    ini.chmod(0o644)
    made = _Folder(tests, folder / "home", folder / "reports")
    for writable in (made.home, made.reports):
        writable.mkdir(mode=0o700)
        sandbox.give(writable)
    folder.chmod(0o755)
    return made


def verdict_of(result: CommandResult, report: bytes | None) -> Verdict:
    """The verdict on pytest's run (`result`) and the JUnit XML report it left (None:
    none). A verifier that could not run is an error; anything short of exit code 0
    with a report of only passed tests is a FAIL, with a reason unless it is a plain
    one (exit code 1 or 2, and a report that says which tests failed)."""
    output = result.render()[-OUTPUT_TAIL:]
    code = result.exit_code
    if result.timed_out:
        error = f"the verifier timed out after {result.timeout:g} s"
        return Verdict(passed=False, output=output, error=error)
    if result.flooded or code in _EXIT_ERRORS:
        meaning = "its output passed the hard limit" if result.flooded else _EXIT_ERRORS[code]
        error = f"pytest exited with code {code} ({meaning})"
        return Verdict(passed=False, output=output, error=error)

    def fail(reason: str) -> Verdict:
        return Verdict(passed=False, output=output, reason=reason)

    # Any other ending (5: nothing collected; a signal; a code pytest never uses) is the
    # test process ending as the code under test made it: the deliverable's doing, so a
    # FAIL with its reason, not an error. Only the report tells what ran.
    killer = signal_name(-code) if code < 0 else ""
    ended = f"killed by {killer}" if code < 0 else f"exit code {code}"
    if report is None:
        return fail(
            f"no structured report: the test process ended before pytest wrote it ({ended})"
        )
    try:
        tally = tally_of(report)
    except ReportError as exc:
        return fail(f"{exc} ({ended})")
    if tally.total == 0:
        return fail(f"no test was collected ({ended})")
    unpassed = tally.failed or tally.errors
    if code == 0 and tally.passed == tally.total:
        return Verdict(passed=True, output=output)
    if code in (1, 2) and unpassed:
        return Verdict(passed=False, output=output)  # a plain failure: the report says so
    if code == 0 and not unpassed:
        return fail(f"the report says {tally}: a skipped or xfailed test is not a passed one")
    exited = f"was killed by {killer}" if code < 0 else f"exited {code}"
    return fail(f"the report says {tally} but pytest {exited}")

"""The verifier: the task's pytest tests, run after the agent in a sandbox of their own,
judged by pytest's own structured report (see docs/verifier.md).

Before it runs, every process of the episode is killed (`Sandbox.kill_all`), so nothing
the agent left running can touch what follows. The tests are then copied afresh to a
folder of ours (read-only to the episode's user) and run, under bwrap, in a new sandbox
that sees the working directory (at its own path, as `TASK_WORKDIR`), that copy, a copy
of pytest and its bytecode cache, an empty HOME and a report folder (both on the
episode's own file system, so what the tests write counts against its storage), with an
empty /tmp, a clean environment, plugin autoloading off and no cache written.

The interpreter runs isolated (`python -I -B -X pycache_prefix=OURS watch.py`):
no user site, no PYTHON* variables, neither the working directory nor the current one on
sys.path, no bytecode of the work folder read, so nothing the agent wrote runs at
start-up. The watch (`turnbon_terminal.verdict.watch`) runs pytest and sends what it
saw on a pipe of ours (`turnbon_terminal.verdict.tamper`). It is this process's own Python if
the sandbox can run it, else a system Python.

PASS needs exit code 0, pytest's `main` to have returned that code, and a JUnit XML
report, written by pytest itself into the report folder, in which at least one test ran
and every test passed, with counts that agree. Whatever else happens once the watch has
started is the tests' (the deliverable's) doing: a FAIL with its reason. Only a verifier
that could not start is an error (an `agent_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from turnbon_graph.bench.environment import Verdict
from turnbon_terminal.host.sandbox import CommandResult, Fresh, Sandbox
from turnbon_terminal.result import signal_name
from turnbon_terminal.task.envvars import SAFE_PATH
from turnbon_terminal.task.folders import TerminalTask
from turnbon_terminal.verdict.bytecode import bytecode_cache
from turnbon_terminal.verdict.junit import REPORT_CAP, ReportError, Tally, read_report, tally_of
from turnbon_terminal.verdict.pytest_site import pytest_site, readable_copy
from turnbon_terminal.verdict.tamper import EvidencePipes, Scan, Watched, combined, scan_workdir

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
WATCH = Path(__file__).with_name("watch.py")
MIN_TEST_TIME_S = 1.0
"""The tests get at least this long, however long the verifier's own set-up took."""

_PROBE = "import sys; sys.path.insert(0, sys.argv.pop(1)); import pytest"
_EXIT_MEANINGS = {3: "internal error", 4: "usage error"}
"""pytest's exit codes for an error of its own (in the tests' run: the tests' doing)."""


class VerifierUnavailableError(Exception):
    """No Python the sandbox user can run has pytest (reported as a verdict error)."""


@dataclass(frozen=True)
class _Candidate:
    python: str
    prefix: Path | None = None
    """Its installation, bound read-only when it is not below a system directory."""


@dataclass(frozen=True)
class _Runtime:
    """What runs the tests: the interpreter, pytest's copy and the bytecode cache."""

    candidate: _Candidate
    site: Path
    cache: Path


class VerifierPython:
    """Finds, once, a Python that can run pytest in the verifier's sandbox."""

    def __init__(self, explicit: str | None = None) -> None:
        self._explicit = explicit
        self._found: _Runtime | None = None

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

    async def resolve(self, sandbox: Sandbox) -> _Runtime:
        """The interpreter, pytest's folder and the bytecode cache; raises
        VerifierUnavailableError."""
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
                [candidate.python, "-I", "-B", "-c", _PROBE, str(site)],
                home=Path("/tmp"),
                time_limit=30,
            )
            lines = probe.output.strip().splitlines()
            if probe.ok:
                cache = await asyncio.to_thread(
                    bytecode_cache, sandbox.host.work_root, candidate.python, site
                )
                self._found = _Runtime(candidate, site, cache)
                return self._found
            problems.append(f"{candidate.python}: {lines[-1] if lines else probe.exit_code}")
        user = f"uid {sandbox.uid}" if sandbox.uid is not None else "the current user"
        raise VerifierUnavailableError(
            f"no Python with pytest that {user} can run in the sandbox "
            f"({'; '.join(problems)}): install python3 for the system (/usr/bin/python3), "
            "or pass verifier_python= to TerminalEnvironment"
        )

    async def prepare(self, sandbox: Sandbox) -> None:
        """Resolves now (at an episode's start), so that no verification's time goes to
        finding the Python and filling the bytecode cache; a failure is left for the
        verification to report."""
        with contextlib.suppress(VerifierUnavailableError):
            await self.resolve(sandbox)


def _candidate(python: str) -> _Candidate:
    real = Path(os.path.realpath(python))
    system = any(Path(d) in real.parents for d in ("/usr", "/bin", "/lib"))
    return _Candidate(python, None if system else real.parents[1])


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
    fds: tuple[int, ...] = (),
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
        fresh=Fresh(readonly=(*prefix, site, *readonly), writable=writable, fds=fds),
    )


@dataclass(frozen=True)
class _Folder:
    """The verifier's folders, all made after the agent's processes died: the tests and
    the watch (ours, read-only, on the host), an empty HOME and the report folder (the
    episode user's, on the episode's own file system)."""

    tests: Path
    watch: Path
    home: Path
    reports: Path


async def run_verifier(
    sandbox: Sandbox, task: TerminalTask, python: VerifierPython, time_limit: float
) -> Verdict:
    """Ends the episode's processes, then runs the task's tests against the working
    directory in a fresh sandbox; never raises for a failure."""
    deadline = time.monotonic() + time_limit
    if not await sandbox.kill_all():
        return Verdict(passed=False, error="processes of the episode survived being killed")
    try:
        runtime = await python.resolve(sandbox)
    except VerifierUnavailableError as exc:
        return Verdict(passed=False, error=str(exc))
    try:
        folder = await asyncio.to_thread(_fresh_folder, sandbox, task.tests_dir)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # The agent left its disk too full for the tests' HOME: its doing, not ours.
        return Verdict(passed=False, reason=f"the episode's disk is full: {exc.strerror}")
    scan = await asyncio.to_thread(
        scan_workdir, sandbox.workdir, task.environment_dir, task.native_extensions
    )
    with EvidencePipes() as pipes:
        left = max(deadline - time.monotonic(), 0)
        result = await _run_tests(sandbox, task, runtime, folder, pipes, left)
        # Outside bwrap (sandbox="uid") something the tests started could still be writing.
        await sandbox.kill_all()
        watched = await asyncio.to_thread(pipes.read)
    report = await asyncio.to_thread(read_report, folder.reports / REPORT_NAME)
    verdict = verdict_of(result, report, watched)
    if result.timed_out and result.timeout < time_limit / 2:
        # Our own set-up (finding a Python, filling the bytecode cache on a busy
        # machine) took most of the time: not the tests' slowness.
        error = f"the verifier's set-up left the tests {result.timeout:.1f} of {time_limit:.1f} s"
        verdict = verdict.model_copy(update={"error": error, "reason": None})
    if verdict.error is None:
        verdict = _annotated(verdict, watched, scan, await sandbox.check_budget())
    return verdict.model_copy(update={"tamper": combined(watched.tamper, scan.tamper)})


async def _run_tests(
    sandbox: Sandbox,
    task: TerminalTask,
    runtime: _Runtime,
    folder: _Folder,
    pipes: EvidencePipes,
    time_left: float,
) -> CommandResult:
    """pytest under the watch, in the verifier's sandbox, sending on `pipes`."""
    tests, cache = folder.tests, str(runtime.cache)
    args = ["-q", "--tb=short", "--color=no", "-p", "no:cacheprovider", "-c", str(tests / INI_NAME)]
    args += ["--rootdir", str(tests), "--import-mode=importlib"]
    args += [f"--junitxml={folder.reports / REPORT_NAME}", str(tests)]
    setup: dict[str, object] = {**pipes.setup(), "workdir": str(sandbox.inside(sandbox.workdir))}
    setup |= {"tests": str(tests), "native_extensions": task.native_extensions}
    setup |= {"reports": str(folder.reports), "site": str(runtime.site)}
    python = [runtime.candidate.python, "-I", "-B", "-X", f"pycache_prefix={cache}"]
    watch = [str(folder.watch), str(runtime.site), json.dumps(setup)]
    return await _in_fresh_sandbox(
        sandbox,
        runtime.candidate,
        runtime.site,
        [*python, *watch, *args],
        home=folder.home,
        time_limit=max(time_left, MIN_TEST_TIME_S),
        readonly=(tests, folder.watch.parent, runtime.cache),
        writable=(folder.home, folder.reports),
        # Pythons the tests start read the same cache and write none.
        env={
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPYCACHEPREFIX": cache,
            "PYTHONDONTWRITEBYTECODE": "1",
            **task.verifier_env,
        },
        cwd=tests,
        keep=64 * 1024,
        fds=pipes.fds,
    )


def _annotated(verdict: Verdict, watched: Watched, scan: Scan, over: str | None) -> Verdict:
    """The verdict on tests that ran, with what else went wrong: a budget the tests went
    over (their doing, never a PASS), and the work folder's pipes, devices and unreadable
    files (named when the tests failed)."""
    reasons = [verdict.reason] if verdict.reason else []
    if over:
        # What the tests wrote (HOME, the report folder) filled the episode's storage, or
        # they ran out of its memory.
        reasons.insert(0, f"the tests went over the episode's budget: {over}")
    refused = {entry.partition(" (")[0] for entry in watched.refused}
    held = [s for s in scan.special if s.partition(" (")[0] not in refused]
    if held and (over or not verdict.passed):
        more = f" and {len(held) - 5} more" if len(held) > 5 else ""
        reasons.append(f"the work folder holds {', '.join(held[:5])}{more}")
    passed = verdict.passed and not over
    return verdict.model_copy(update={"passed": passed, "reason": "; ".join(reasons) or None})


def _fresh_folder(sandbox: Sandbox, source: Path) -> _Folder:
    """A copy of the task's tests the agent never saw, in a new folder of ours, read-only
    to the episode's user, with our own ini file (without one pytest would look upwards
    from the tests) and the watch; HOME and the report folder on the episode's disk."""
    ours = Path(tempfile.mkdtemp(prefix="verify-", dir=sandbox.root))
    tests = ours / "tests"
    readable_copy(source, tests)
    ini = tests / INI_NAME
    ini.write_text("[pytest]\njunit_family = xunit2\n", encoding="utf-8")
    ini.chmod(0o644)
    watch = ours / "watch" / WATCH.name
    watch.parent.mkdir(mode=0o755)
    shutil.copyfile(WATCH, watch)
    watch.chmod(0o644)
    ours.chmod(0o755)
    theirs = Path(tempfile.mkdtemp(prefix="verify-", dir=sandbox.resources.root))
    made = _Folder(tests, watch, theirs / "home", theirs / "reports")
    for writable in (made.home, made.reports):
        writable.mkdir(mode=0o700)
        sandbox.give(writable)
    theirs.chmod(0o755)
    return made


def verdict_of(
    result: CommandResult,
    report: bytes | None,
    watched: Watched | None = None,
) -> Verdict:
    """The verdict on pytest's run (`result`), the JUnit XML report it left (None: none)
    and what the watch sent (None: nothing known of it). A verifier whose watch never
    started is an error; anything short of exit code 0, returned by pytest, with a report
    of only passed tests is a FAIL, with a reason unless it is a plain one (exit code 1
    or 2, and a report that says which tests failed)."""
    output = result.render()[-OUTPUT_TAIL:]
    code = result.exit_code
    if watched is not None and not watched.started:
        how = f"timed out after {result.timeout:.1f} s" if result.timed_out else f"exit code {code}"
        said = (result.output.strip().splitlines() or ["no output"])[-1][:300]
        return Verdict(
            passed=False, output=output, error=f"the tests never started ({how}): {said}"
        )
    opened = watched.refused if watched is not None else []
    refused = f"; the verifier refused to open {', '.join(opened)}" if opened else ""

    def fail(reason: str) -> Verdict:
        return Verdict(passed=False, output=output, reason=reason + refused)

    # From here on every ending is the test process ending as the code under test made
    # it: a FAIL with its reason, never an error. Only the report tells what ran.
    if result.timed_out:
        return fail(f"the tests did not finish within {result.timeout:.1f} s")
    if result.flooded:
        return fail(f"the tests' output passed the hard limit ({result.hard_limit} bytes)")
    killer = signal_name(-code) if code < 0 else ""
    ended = f"killed by {killer}" if code < 0 else f"exit code {code}"
    if report is None:
        return fail(
            f"no structured report: the test process ended before pytest wrote it ({ended})"
        )
    try:
        tally = tally_of(report)
    except ReportError as exc:
        if code in _EXIT_MEANINGS:  # pytest stopped mid-run: its report may not add up
            return fail(f"pytest exited with code {code} ({_EXIT_MEANINGS[code]}); {exc}")
        return fail(f"{exc} ({ended})")
    if code in _EXIT_MEANINGS:
        return fail(
            f"pytest exited with code {code} ({_EXIT_MEANINGS[code]}); the report says {tally}"
        )
    if tally.total == 0:
        return fail(f"no test was collected ({ended})")
    unpassed = tally.failed or tally.errors
    if code == 0 and tally.passed == tally.total:
        if watched is not None and watched.returned is None:
            return fail("the test process ended before pytest returned (exit code 0)")
        if watched is not None and watched.returned != 0:
            return fail(f"pytest returned {watched.returned} but the test process exited 0")
        return Verdict(passed=True, output=output)
    if code in (1, 2) and unpassed:
        # A plain failure: the report says so (and what the verifier refused, if anything).
        return Verdict(passed=False, output=output, reason=refused[2:] or None)
    if code == 0 and not unpassed:
        return fail(f"the report says {tally}: a skipped or xfailed test is not a passed one")
    exited = f"was killed by {killer}" if code < 0 else f"exited {code}"
    return fail(f"the report says {tally} but pytest {exited}")

"""The verifier: the task's pytest tests, run after the agent in a sandbox of their own.

Before it runs, every process of the episode is killed (`Sandbox.kill_all`), so nothing
the agent left running can touch what follows. The tests are then copied afresh to a
folder of ours (read-only to the episode's user) and run, under bwrap, in a new sandbox
that sees the working directory, that copy and a copy of pytest, with an empty /tmp,
`TASK_WORKDIR` set, a clean environment, plugin autoloading off and no cache written.
The interpreter: this process's own if the sandbox can run it, else a system Python,
with pytest and its dependencies (pure Python) on PYTHONPATH from that copy.
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
from turnbon_terminal.pytest_site import pytest_site, readable_copy
from turnbon_terminal.sandbox import CommandResult, Fresh, Sandbox
from turnbon_terminal.tasks import TerminalTask

OUTPUT_TAIL = 4000
"""Characters of pytest's output kept in the verdict (its end: the summary)."""

INI_NAME = ".turnbon-pytest.ini"
_PROBE = "import sys, pytest; print('%d.%d' % sys.version_info[:2])"
_EXIT_MEANINGS = {
    3: "internal error",
    4: "usage error",
    5: "no tests were collected",
}


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
            probe = await _in_fresh_sandbox(
                sandbox, candidate, site, [candidate.python, "-P", "-B", "-c", _PROBE], (), 30
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


async def _in_fresh_sandbox(
    sandbox: Sandbox,
    candidate: _Candidate,
    site: Path,
    argv: list[str],
    readonly: tuple[Path, ...],
    time_limit: float,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    keep: int | None = None,
) -> CommandResult:
    prefix = (candidate.prefix,) if candidate.prefix is not None else ()
    return await sandbox.execute(
        argv,
        env={"PYTHONPATH": str(site), **(env or {})},
        time_limit=time_limit,
        cwd=cwd,
        keep=keep,
        fresh=Fresh(readonly=(*prefix, site, *readonly)),
    )


async def run_verifier(
    sandbox: Sandbox, task: TerminalTask, python: VerifierPython, time_limit: float
) -> Verdict:
    """Ends the episode's processes, then runs the task's tests against the working
    directory in a fresh sandbox; never raises for a failure."""
    if not await sandbox.kill_all():
        return Verdict(passed=False, error="processes of the episode survived being killed")
    tests = await asyncio.to_thread(_fresh_tests, sandbox.root, task.tests_dir)
    try:
        candidate, site = await python.resolve(sandbox)
    except VerifierUnavailableError as exc:
        return Verdict(passed=False, error=str(exc))
    ini = tests / INI_NAME
    argv = [
        candidate.python,
        "-P",  # the working directory is not on sys.path: no planted pytest.py
        "-B",
        "-m",
        "pytest",
        "-q",
        "--tb=short",
        "--color=no",
        "-p",
        "no:cacheprovider",
        "-c",
        str(ini),
        "--rootdir",
        str(tests),
        "--import-mode=importlib",
        str(tests),
    ]
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    result = await _in_fresh_sandbox(
        sandbox,
        candidate,
        site,
        argv,
        (tests.parent,),
        time_limit,
        env={**env, **task.verifier_env},
        cwd=tests,
        keep=64 * 1024,
    )
    return verdict_of(result)


def _fresh_tests(root: Path, source: Path) -> Path:
    """A copy of the task's tests the agent never saw: made after its processes ended,
    in a new folder of ours, read-only to the episode's user. Our own ini file: without
    one pytest would look upwards from the tests for one."""
    folder = Path(tempfile.mkdtemp(prefix="verify-", dir=root))
    tests = folder / "tests"
    readable_copy(source, tests)
    ini = tests / INI_NAME
    ini.write_text("[pytest]\n", encoding="utf-8")
    ini.chmod(0o644)
    folder.chmod(0o755)
    return tests


def verdict_of(result: CommandResult) -> Verdict:
    output = result.render()[-OUTPUT_TAIL:]
    if result.timed_out:
        return Verdict(
            passed=False,
            output=output,
            error=f"the verifier timed out after {result.timeout:g} s",
        )
    if result.flooded or result.exit_code < 0 or result.exit_code > 2:
        meaning = _EXIT_MEANINGS.get(result.exit_code, "it could not run")
        return Verdict(
            passed=False,
            output=output,
            error=f"pytest exited with code {result.exit_code} ({meaning})",
        )
    # 0: all passed; 1: some failed; 2: a test module failed to import (the deliverable
    # broken, usually): the submission is wrong, the verifier itself worked.
    return Verdict(passed=result.exit_code == 0, output=output)

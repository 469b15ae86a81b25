"""The verifier: the task's pytest tests, run as the episode's user after the agent.

The tests are copied next to (not into) the working directory, so the agent cannot have
changed them, and run with `TASK_WORKDIR` set, a clean environment (no secrets of this
process), plugin autoloading off and no cache written. pytest must be importable by a
Python the episode's user can execute: this process's own interpreter if it can, else
a system Python of the same version with this interpreter's pytest on PYTHONPATH
(a pyenv or venv under /root is out of the sandbox user's reach).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from turnbon_graph.bench.environment import Verdict
from turnbon_terminal.envvars import SAFE_PATH
from turnbon_terminal.sandbox import CommandResult, Sandbox
from turnbon_terminal.tasks import TerminalTask
from turnbon_terminal.workroot import remove_tree

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
    env: dict[str, str]
    version: str | None = None
    """The version it must have (set when it borrows this interpreter's pytest)."""


class VerifierPython:
    """Finds, once, a Python with pytest that the sandbox user can run."""

    def __init__(self, explicit: str | None = None) -> None:
        self._explicit = explicit
        self._found: tuple[str, dict[str, str]] | None = None

    def _candidates(self) -> list[_Candidate]:
        if self._explicit:
            return [_Candidate(self._explicit, {})]
        found = [_Candidate(sys.executable, {})]
        spec = importlib.util.find_spec("pytest")
        if spec is None or spec.origin is None:
            return found
        site = str(Path(spec.origin).resolve().parents[1])
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        seen = {os.path.realpath(sys.executable)}
        for name in (f"python{version}", "python3"):
            path = shutil.which(name, path=SAFE_PATH)
            if path and os.path.realpath(path) not in seen:
                seen.add(os.path.realpath(path))
                found.append(_Candidate(path, {"PYTHONPATH": site}, version))
        return found

    async def resolve(self, sandbox: Sandbox) -> tuple[str, dict[str, str]]:
        """(interpreter, extra environment); raises VerifierUnavailableError."""
        if self._found is not None:
            return self._found
        problems = []
        for candidate in self._candidates():
            probe = await sandbox.execute(
                [candidate.python, "-P", "-B", "-c", _PROBE],
                env=candidate.env,
                time_limit=30,
                cwd=sandbox.tmpdir,
            )
            lines = probe.output.strip().splitlines()
            if probe.ok and candidate.version in (None, lines[-1] if lines else None):
                self._found = (candidate.python, dict(candidate.env))
                return self._found
            why = lines[-1] if lines else f"exit code {probe.exit_code}"
            if probe.ok:
                why = f"Python {why}, not {candidate.version}"
            shown = f" with {candidate.env}" if candidate.env else ""
            problems.append(f"{candidate.python}{shown}: {why}")
        user = f"uid {sandbox.uid}" if sandbox.uid is not None else "the current user"
        raise VerifierUnavailableError(
            f"no Python with pytest that {user} can run ({'; '.join(problems)}): install "
            "pytest where the sandbox user can read it (e.g. for /usr/bin/python3), or "
            "pass verifier_python= to TerminalEnvironment"
        )


async def run_verifier(
    sandbox: Sandbox, task: TerminalTask, python: VerifierPython, time_limit: float
) -> Verdict:
    """Runs the task's tests against the working directory; never raises for a failure."""
    tests = sandbox.root / "tests"
    remove_tree(tests)
    shutil.copytree(task.tests_dir, tests, symlinks=True)
    # Our own ini file: without one pytest would look for one upwards from the tests,
    # and find one the agent planted in /tmp (addopts that skip every test).
    ini = tests / INI_NAME
    ini.write_text("[pytest]\n", encoding="utf-8")
    os.chmod(tests, 0o700)
    sandbox.give(tests)
    try:
        interpreter, env = await python.resolve(sandbox)
    except VerifierUnavailableError as exc:
        return Verdict(passed=False, error=str(exc))
    argv = [
        interpreter,
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
    result = await sandbox.execute(
        argv,
        env={
            **env,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            **task.verifier_env,
        },
        cwd=tests,
        time_limit=time_limit,
        keep=64 * 1024,
    )
    return verdict_of(result)


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

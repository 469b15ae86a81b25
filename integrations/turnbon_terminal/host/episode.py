"""An episode of a task in the host sandbox (`turnbon_terminal.host.sandbox`): its working
directory with the task's files, the `shell` tool, the pytest verifier, and forks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from turnbon_graph.bench.copying import copy_tree
from turnbon_graph.bench.environment import Verdict
from turnbon_graph.errors import ConfigurationError, ResourceLimitError
from turnbon_terminal.errors import SandboxError, SetupScriptError, TaskFormatError
from turnbon_terminal.host.sandbox import CommandResult, Sandbox, SandboxHost
from turnbon_terminal.shell_tool import ShellTool
from turnbon_terminal.task.folders import SETUP_SCRIPT, TerminalTask, read_task_text
from turnbon_terminal.task.settings import verifier_limit
from turnbon_terminal.verdict.verifier import VerifierPython, run_verifier

T = TypeVar("T")


class TerminalEpisode:
    """One attempt at one task: a sandbox, the `shell` tool, the verifier."""

    def __init__(self, task: TerminalTask, sandbox: Sandbox, python: VerifierPython) -> None:
        self.task = task
        self.sandbox = sandbox
        self._python = python
        self._tools: list[BaseTool] = [ShellTool(sandbox)]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    @property
    def workdir(self) -> Path:
        return self.sandbox.workdir

    async def run(self, command: str, *, time_limit: float | None = None) -> CommandResult:
        """A command as the agent would run it (for tests, scripts and oracles)."""
        return await self.sandbox.run(command, time_limit=time_limit)

    async def run_solution(self) -> CommandResult:
        """The task's solution/solve.sh, run from the working directory."""
        script = self.task.solution_script
        if script is None:
            raise ConfigurationError(f"task {self.task.id} has no solution/solve.sh")
        return await self.sandbox.run(
            read_task_text(script),
            time_limit=self.task.spec.agent_timeout_s,
            env=self.task.solution_env,
        )

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over, after its last command (the
        runner then ends it as `resource_limit`)."""
        return self.sandbox.over_budget

    async def verify(self) -> Verdict:
        """Runs the task's tests; raises `ResourceLimitError` instead when the episode
        went over its budget (a process left in the background may have since)."""
        if over := await self.sandbox.check_budget():
            raise ResourceLimitError(f"the episode went over its budget: {over}")
        if not self.task.has_verifier:
            return Verdict(
                passed=False,
                error=f"task {self.task.id} has no verifier (tests/test_*.py): nothing to check",
            )
        limit = verifier_limit(self.task.spec.verifier_timeout_s)
        # Every process of the episode ends first; the tests run in a fresh sandbox.
        return await run_verifier(self.sandbox, self.task, self._python, limit)

    async def fork(self) -> TerminalEpisode:
        """A new episode of the same task and verifier, in a sandbox of its own (its own
        uid when isolating), whose working directory and TMPDIR are copies of this one's:
        what either does from now on, the other never sees. Close it like any episode.

        Files only, as they are: sparse files stay sparse, hard links stay links, modes
        and times are kept (see `turnbon_graph.bench.copying`). Processes this episode
        left running are not carried over, and named pipes, sockets and device files are
        left out (each logged as a warning). Symbolic links are never followed; those
        that point into this episode's directory are pointed into the fork's (the paths
        differ)."""
        if self.sandbox.closed:
            raise SandboxError("this episode is closed: fork it before closing it")
        sandbox = await _to_the_end(
            functools.partial(
                self.sandbox.host.create, network=self.sandbox.network, budget=self.sandbox.budget
            ),
            f"{self.task.id}-fork",
            undo=lambda made: made.close(),
        )
        try:
            await _to_the_end(_copy_sandbox, self.sandbox, sandbox)
        except BaseException:
            await sandbox.close()
            raise
        return TerminalEpisode(self.task, sandbox, self._python)

    async def close(self) -> None:
        """Kills every process the episode left and removes its directory."""
        await self.sandbox.close()


async def start_host_episode(
    host: SandboxHost, python: VerifierPython, task: TerminalTask, trial: int
) -> TerminalEpisode:
    """A fresh working directory with the task's files, after its setup.sh ran."""
    sandbox = await _to_the_end(
        functools.partial(
            host.create,
            network=task.allow_internet,
            budget=task.budget,
        ),
        f"{task.id}-{trial}",
        undo=lambda made: made.close(),
    )
    try:
        await _to_the_end(_copy_environment, task, sandbox)
        script = task.setup_script
        if script is not None:
            result = await sandbox.run(read_task_text(script), time_limit=task.setup_timeout_s)
            if not result.ok:
                raise SetupScriptError(
                    f"setup.sh of task {task.id} failed, so the episode cannot start; "
                    f"fix the script (its output ends: {result.render()[-1500:]})"
                )
        if task.has_verifier:
            await python.prepare(sandbox)  # once per environment
    except BaseException:
        await sandbox.close()
        raise
    return TerminalEpisode(task, sandbox, python)


async def _to_the_end(
    function: Callable[..., T],
    *args: Any,
    undo: Callable[[T], Awaitable[None]] | None = None,
) -> T:
    """`function(*args)` in a thread. Cancelled meanwhile, it waits for the thread to end
    (and undoes its result) before re-raising: a sandbox made or files copied behind the
    caller's back would outlive the episode."""
    job = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            result = await job
            if undo is not None:
                await undo(result)
        raise


def _copy_environment(task: TerminalTask, sandbox: Sandbox) -> None:
    source = task.environment_dir
    if source.is_dir():  # an inline task's is a symlink to the user's folder: resolved
        report = copy_tree(source.resolve(), sandbox.workdir, skip=[SETUP_SCRIPT])
        if report.unreadable:
            raise TaskFormatError(
                f"could not read {'; '.join(report.unreadable[:3])} in {source}: make the "
                f"files of task {task.id}'s environment readable to this user"
            )
        report.log(f"starting task {task.id}")
    sandbox.give(sandbox.workdir)


def _copy_sandbox(source: Sandbox, target: Sandbox) -> None:
    """The files of `source`'s working directory and TMPDIR into `target`'s, then
    handed to `target`'s user (the copies are ours until then)."""
    for old, new in zip(source.writable_dirs, target.writable_dirs, strict=True):
        report = copy_tree(old, new)
        if report.unreadable:
            raise SandboxError(
                f"could not copy {old} into a fork (could not read "
                f"{'; '.join(report.unreadable[:3])}): an agent that took away its own "
                "permissions on files cannot be forked without root"
            )
        report.log(f"a fork of {source.root.name}")
        _retarget_links(new, source.root, target.root, old)
        target.give(new)


def _retarget_links(tree: Path, old_root: Path, new_root: Path, old_tree: Path) -> None:
    """Symlinks that lead into the old episode's directory lead into the new one's, so a
    fork never reads or writes the episode it was copied from (a relative link that
    stays inside already does; an absolute one, or one that climbs out and back by the
    old directory's name, is rewritten)."""
    for folder, dirs, files in os.walk(tree):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                continue
            target = os.readlink(path)
            old_place = os.path.join(old_tree, os.path.relpath(folder, tree))
            meant = _inside(os.path.normpath(os.path.join(old_place, target)), old_root)
            if meant is None:
                continue  # leads outside the episode (/usr/bin/python3): unchanged
            wanted = os.path.join(new_root, meant) if meant else str(new_root)
            if os.path.normpath(os.path.join(folder, target)) != os.path.normpath(wanted):
                os.unlink(path)
                os.symlink(wanted, path)


def _inside(path: str, root: Path) -> str | None:
    """`path` relative to `root` ("" for root itself), or None when it is outside."""
    prefix = str(root)
    if path == prefix:
        return ""
    if path.startswith(prefix + os.sep):
        return path[len(prefix) + 1 :]
    return None

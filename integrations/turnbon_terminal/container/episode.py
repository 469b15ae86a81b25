"""An episode of a task in a container: the agent's `shell` tool (in a shell session kept
for the episode, `turnbon_terminal.container.session`, when the environment opens one),
then the verifier run the way Harbor runs Terminal-Bench 2's (never in that session).

After the agent, the processes it left keep running (a task may ask for a server), and
`(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1` runs in the working directory as
the image's user, with `[verifier] env`, within `[verifier] timeout_sec`, sealed from
them: a fresh `/tests` and `/logs/verifier` that only it sees (`container.sealed`; an
image that cannot be sealed runs it as before, with the old reward files removed and
`tests/` copied in). Its exit code is ignored: the reward file is the verdict
(`turnbon_terminal.verdict.reward`); what the agent left is evidence on it.

A task made for the host sandbox (no image, pytest tests) runs in a container too when
asked (`sandbox="container"`): in the environment's default image, with its
`environment/` files copied into the working directory and its setup.sh run there first;
its tests are then run as TB2's test.sh scripts run theirs: pytest (a copy of this
machine's, put on PYTHONPATH) over /tests, reward 1 when it exits 0, else 0.
"""

from __future__ import annotations

import asyncio
import io
import secrets
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

from langchain_core.tools import BaseTool

from turnbon_graph.bench.environment import Verdict
from turnbon_graph.errors import ConfigurationError, ResourceLimitError
from turnbon_terminal.container import sealed
from turnbon_terminal.container.engine import ContainerError
from turnbon_terminal.container.fork import fork_container
from turnbon_terminal.container.instance import VERIFIER_LOGS, Container
from turnbon_terminal.container.sealed import TESTS
from turnbon_terminal.container.session import FOLDER_PREFIX, Session, ShellState
from turnbon_terminal.container.session_tool import SessionShellTool
from turnbon_terminal.errors import SandboxError, SetupScriptError
from turnbon_terminal.result import CommandResult
from turnbon_terminal.shell_tool import ShellTool
from turnbon_terminal.task.folders import SETUP_SCRIPT, TerminalTask, read_task_text
from turnbon_terminal.task.settings import verifier_limit
from turnbon_terminal.task.tb2 import TEST_SCRIPT
from turnbon_terminal.verdict.pytest_site import pytest_site
from turnbon_terminal.verdict.reward import REWARD_JSON, REWARD_TEXT, TEST_OUTPUT, reward_verdict

SOLUTION = "/solution"
PYTEST_SITE = "/opt/turnbon-pytest"
"""Where a host task's verifier finds pytest in the container (a copy of this machine's)."""
PYTEST_SCRIPT = (
    f"python3 -m pytest -q --tb=short --color=no -p no:cacheprovider --rootdir {TESTS} {TESTS}"
    f"; if [ $? -eq 0 ]; then echo 1 > {VERIFIER_LOGS}/{REWARD_TEXT}; "
    f"else echo 0 > {VERIFIER_LOGS}/{REWARD_TEXT}; fi"
)
"""A host task's pytest tests, run as TB2's test.sh scripts run theirs."""
STEP_LIMIT_S = 60.0
"""The time limit of each of the verifier's own steps (removing, copying, chmod)."""


class ContainerEpisode:
    """One attempt at one task, in a container of its own (`TerminalEnvironment.start`
    makes it for a task with an image).

    Args:
        task: The task.
        container: Its started container, which the episode owns from now on.
    """

    def __init__(self, task: TerminalTask, container: Container) -> None:
        self.task = task
        self.container = container
        self.session: Session | None = None
        """The agent's shell session, once `open_session` started it."""
        self._tools: list[BaseTool] = [ShellTool(container)]

    @property
    def tools(self) -> Sequence[BaseTool]:
        """The agent's tools: `shell`, run in the container (in its shell session, once
        `open_session` started one; else each command in a fresh `bash -c`)."""
        return self._tools

    async def open_session(self, state: ShellState | None = None) -> bool:
        """Starts the agent's shell session (`turnbon_terminal.container.session`), in
        which its `shell` tool runs from now on.

        Args:
            state: The directory and exported variables its shell starts with (a fork's:
                its parent's); None: the working directory.

        Returns:
            False when the image has no tmux: the tool keeps a fresh `bash -c` per
            command, and its description says so.
        """
        self.session = await Session.open(self.container, state)
        if self.session is None:
            note = "(This image has no tmux, so no shell session is kept.)"
            self._tools = [ShellTool(self.container, note=note)]
            return False
        self._tools = [SessionShellTool(self.session)]
        return True

    @property
    def location(self) -> str:
        """Where the working directory is, in words (it is not on this machine)."""
        return f"{self.container.workdir} of the container {self.container.name}"

    async def export_workdir(self, target: Path) -> list[str]:
        """Copies the working directory out of the container (`turnbon run
        --keep-workdir`).

        Args:
            target: A new folder on this machine.

        Returns:
            What the copy lacks: nothing, the engine copies every file as it is.
        """
        await self.container.copy_out(self.container.workdir, target)
        return []

    async def run(self, command: str, *, time_limit: float | None = None) -> CommandResult:
        """A command in a fresh `bash -c`, outside the agent's shell session (for tests,
        scripts and oracles).

        Args:
            command: A bash command line, run with `bash -c` in the working directory.
            time_limit: Seconds before it is killed (default: the command timeout).

        Returns:
            What it printed and how it ended.
        """
        return await self.container.run(command, time_limit=time_limit)

    async def run_solution(self) -> CommandResult:
        """The task's solution, as Harbor's oracle runs it: solution/ copied to
        /solution, then /solution/solve.sh run in the working directory.

        Returns:
            What solve.sh printed and how it ended.

        Raises:
            ConfigurationError: The task has no solution/solve.sh.
        """
        if self.task.solution_script is None:
            raise ConfigurationError(f"task {self.task.id} has no solution/solve.sh")
        await self.container.copy_in(self.task.solution_script.parent, SOLUTION)
        return await self.container.execute(
            ["bash", "-c", f"chmod +x {SOLUTION}/solve.sh && {SOLUTION}/solve.sh"],
            time_limit=self.task.spec.agent_timeout_s,
            env={"DEBIAN_FRONTEND": "noninteractive", **self.task.solution_env},
        )

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over, after its last command."""
        return self.container.over_budget

    async def verify(self) -> Verdict:
        """Runs the task's tests/test.sh and reads the reward it wrote.

        Returns:
            The verdict: PASS for a reward of 1 or more, with the reward and the end of
            test.sh's output; an error when no reward came.

        Raises:
            ResourceLimitError: The episode went over its budget before the tests.
        """
        if over := await self.container.check_budget():
            raise ResourceLimitError(f"the episode went over its budget: {over}")
        if not self.task.has_verifier:
            return Verdict(
                passed=False,
                error=f"task {self.task.id} has no verifier (tests/{TEST_SCRIPT}): nothing "
                "to check",
            )
        limit = verifier_limit(self.task.spec.verifier_timeout_s)
        deadline = time.monotonic() + limit
        left = await sealed.left_processes(self.container, [FOLDER_PREFIX])
        changed = await sealed.changed_system_files(self.container)
        try:
            folder, timed_out, unsealed = await self._run_sealed(deadline)
            if unsealed is not None:  # as before, in reach of the agent's processes
                result = await self._run_tests(deadline)
                folder, timed_out = self.container.verifier_logs, result.timed_out
        except (ContainerError, SandboxError) as exc:
            return Verdict(passed=False, error=f"the tests could not run: {exc}")
        verdict = await asyncio.to_thread(
            reward_verdict,
            folder,
            timed_out=limit if timed_out else None,
            network=self.container.network,
        )
        found = sealed.evidence(left, changed, unsealed)
        verdict = verdict.model_copy(update={"tamper": [*found, *verdict.tamper]})
        if (over := await self.container.check_budget()) and verdict.error is None:
            # The tests went over the episode's memory or storage: never a PASS.
            reason = f"the tests went over the episode's budget: {over}"
            verdict = verdict.model_copy(update={"passed": False, "reason": reason})
        return verdict

    async def prepare(self) -> None:
        """A host task's start in its container: its environment/ files copied into the
        working directory (setup.sh left out), then its setup.sh run there."""
        files = await asyncio.to_thread(_environment_tar, self.task)
        if files is not None:
            await self.container.copy_tar(files, self.container.workdir)
        script = self.task.setup_script
        if script is not None:
            result = await self.container.run(
                read_task_text(script), time_limit=self.task.setup_timeout_s
            )
            if not result.ok:
                raise SetupScriptError(
                    f"setup.sh of task {self.task.id} failed, so the episode cannot start; "
                    f"fix the script (its output ends: {result.render()[-1500:]})"
                )

    async def _run_sealed(self, deadline: float) -> tuple[Path, bool, str | None]:
        """test.sh sealed from the agent's processes (`container.sealed`): the folder its
        files came back to, whether its limit ended it, and why it could not be sealed
        (a host task's pytest tests, an image without util-linux), or None."""
        if not self.task.has_test_script:
            return self.container.verifier_logs, False, sealed.HOST_TESTS
        tests = await asyncio.to_thread(_folder_tar, self.task.tests_dir)
        assert tests is not None  # it holds test.sh
        into = self.container.folder / f"verdict-{secrets.token_hex(4)}"
        ran = await sealed.run_sealed(
            self.container,
            tests,
            f"{TESTS}/{TEST_SCRIPT}",
            user=await sealed.image_user(self.container),
            limit=max(deadline - time.monotonic(), 1.0),
            env=self.task.verifier_env,
            into=into,
        )
        return into, ran.timed_out, None if ran.exit_code is not None else sealed.NO_UTIL_LINUX

    async def _run_tests(self, deadline: float) -> CommandResult:
        # Whatever the agent left there, a reward file it wrote included.
        old = [f"{VERIFIER_LOGS}/{name}" for name in (REWARD_JSON, REWARD_TEXT, TEST_OUTPUT)]
        cleared = await self.container.execute(
            ["rm", "-rf", "--", TESTS, PYTEST_SITE, *old], time_limit=STEP_LIMIT_S, root=True
        )
        if not cleared.ok:
            raise ContainerError(f"could not remove the old /tests: {cleared.render()[-500:]}")
        await self.container.copy_in(self.task.tests_dir, TESTS)
        env = dict(self.task.verifier_env)
        if self.task.has_test_script:
            script = f"{TESTS}/{TEST_SCRIPT}"
            await self.container.execute(
                ["chmod", "+x", script], time_limit=STEP_LIMIT_S, root=True
            )
        else:
            site = await asyncio.to_thread(pytest_site, self.container.host.work_root)
            await self.container.copy_in(site, PYTEST_SITE)
            script = PYTEST_SCRIPT
            env |= {
                "PYTHONPATH": PYTEST_SITE,
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        left = max(deadline - time.monotonic(), 1.0)
        command = f"({script}) > {VERIFIER_LOGS}/{TEST_OUTPUT} 2>&1"
        return await self.container.execute(["bash", "-c", command], time_limit=left, env=env)

    async def fork(self) -> ContainerEpisode:
        """A new episode of the same task in a container of its own whose files are a
        copy of this one's (`turnbon_terminal.container.fork`): what either does from
        now on, the other never sees. Processes are not carried over; with a shell
        session, the fork's starts in the directory, with the exported variables, that
        the parent's last finished command left. Close it like any episode.

        Returns:
            The fork.

        Raises:
            SandboxError: This episode is closed, or the engine could not copy it.
        """
        state = await self.session.state() if self.session is not None else None
        fork = ContainerEpisode(self.task, await fork_container(self.container))
        if self.session is not None:
            try:
                await fork.open_session(state)
            except BaseException:
                await fork.close()
                raise
        return fork

    async def close(self) -> None:
        """Removes the container, its volume and the image built for it."""
        await self.container.close()


def _environment_tar(task: TerminalTask) -> bytes | None:
    """The task's environment/ files as a tar archive, setup.sh left out, owned by root;
    None when there are none (blocking). An inline task's environment is a link to the
    user's folder: followed."""
    return _folder_tar(task.environment_dir, leave_out=SETUP_SCRIPT)


def _folder_tar(folder: Path, leave_out: str | None = None) -> bytes | None:
    """The files of `folder` (but `leave_out`) as a tar archive owned by root; None when
    there are none (blocking)."""
    buffer = io.BytesIO()
    source = folder.resolve()

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    entries = sorted(source.iterdir()) if source.is_dir() else []
    entries = [entry for entry in entries if entry.name != leave_out]
    if not entries:
        return None
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for entry in entries:
            archive.add(entry, arcname=entry.name, filter=owned)
    return buffer.getvalue()

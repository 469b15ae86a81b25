"""Task folders in the Terminal-Bench 2 (Harbor) layout, read into `TaskSpec`s.

    <task-id>/
      instruction.md        what the agent is told
      task.toml             [agent] timeout_sec, max_turns; [verifier] timeout_sec, env;
                            [metadata] difficulty, category, tags; [environment]
                            build_timeout_sec (the image build's or setup.sh's limit),
                            docker_image, workdir, network_mode / allow_internet (no
                            network unless allowed), memory_mb, storage_mb, cpus (the
                            episode's budget)
      environment/          a task for the host sandbox: copied into the working
                            directory; setup.sh, if present, runs there (as the
                            episode's user) before the agent starts. A container task:
                            its Dockerfile and build context (`turnbon_terminal.task.tb2`)
      solution/solve.sh     the reference solution, run from the working directory
      tests/                the verifier: test.sh writing /logs/verifier/reward.txt
                            (Terminal-Bench 2, in the container), or pytest tests
                            (test_*.py) run after the agent in the host sandbox

Paths are relative to the working directory, which commands, setup.sh, solve.sh and the
verifier also find in `TASK_WORKDIR`. A task with an `environment/Dockerfile` or a
`docker_image` runs in a container (`turnbon_terminal.container.instance`), at `/app` unless its
image or task.toml says otherwise; one with a compose file is refused with
`DockerRequiredError` (or skipped with a warning when `skip_docker=True`).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.errors import DockerRequiredError, TaskFormatError
from turnbon_terminal.task.budget import (
    DEFAULT_CPUS,
    DEFAULT_MEMORY_MB,
    DEFAULT_STORAGE_MB,
    ResourceBudget,
)
from turnbon_terminal.task.tb2 import (
    DEFAULT_BUILD_TIMEOUT_S,
    ContainerSpec,
    container_spec,
    has_test_script,
    network_allowed,
)

SHIPPED_TASKS = Path(__file__).resolve().parent.parent / "tasks"
"""The task suite that ships with the package."""

FRESH_SHELL_NOTE = (
    "each call runs one command with "
    "`bash -c` in the task's working directory (also in $TASK_WORKDIR), and returns its "
    "output and exit code. Nothing persists between calls except files (so `cd` and "
    "variables do not carry over)."
)
SESSION_SHELL_NOTE = (
    "one bash session in a terminal, started in the task's working directory (also in "
    "$TASK_WORKDIR), is kept from call to call: `cd`, variables, background jobs and "
    "running programs carry over. Each call returns the output and exit code, or the "
    "screen when the command is still running (the tool's description says how to type "
    "into it or interrupt it)."
)
"""What a container task's instruction says instead of `FRESH_SHELL_NOTE` when its
episodes keep a shell session (`TerminalEnvironment(shell="session")`)."""
AGENT_NOTE = (
    "\n\n---\n"
    f"You work in a Linux shell through the `shell` tool: {FRESH_SHELL_NOTE} "
    "There is no network. When the task is done, reply "
    "with a short summary and no tool call."
)
"""Appended to every instruction: what a model needs to know about this environment (a
task with `allow_internet = true` is told the network is reachable instead)."""

_OFFLINE, _ONLINE = "There is no network.", "The network is reachable."

SETUP_SCRIPT = "setup.sh"
DEFAULT_SETUP_TIMEOUT_S = 120.0
DEFAULT_VERIFIER_TIMEOUT_S = 120.0


class DockerTaskSkipped(UserWarning):
    """A task that cannot run here (a compose file) was skipped (`load_tasks(...,
    skip_docker=True)`)."""


@dataclass(frozen=True)
class TerminalTask:
    """A task as the runner sees it (`spec`) and the folder it came from."""

    spec: TaskSpec
    """What the runner sees: id, instruction, time limits, ..."""
    folder: Path
    """The task's folder (instruction.md, task.toml, environment/, tests/, solution/)."""
    setup_timeout_s: float = DEFAULT_SETUP_TIMEOUT_S
    """Seconds the environment's set-up script may take."""
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for the verifier (`[verifier.env]`)."""
    solution_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for the reference solution (`[solution.env]`)."""
    native_extensions: bool = False
    """`[verifier] native_extensions = true`: the deliverable may be native extension
    modules (`.so`), which the tests then load; otherwise the verifier never loads one
    from the work folder and names it as tamper evidence."""
    allow_internet: bool = False
    """`[environment] network_mode = "public"` or `allow_internet = true` (Terminal-Bench
    2's keys): the sandbox reaches the network; otherwise it has none (loopback only)."""
    budget: ResourceBudget = field(default_factory=ResourceBudget)
    """`[environment] memory_mb`, `storage_mb` and `cpus` (Terminal-Bench 2's keys)."""
    container: ContainerSpec | None = None
    """The task's image (a Dockerfile or `docker_image`): it runs in a container; None:
    in the host sandbox (unless the environment puts every task in a container)."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def environment_dir(self) -> Path:
        return self.folder / "environment"

    @property
    def setup_script(self) -> Path | None:
        path = self.environment_dir / SETUP_SCRIPT
        return path if path.is_file() else None

    @property
    def solution_script(self) -> Path | None:
        path = self.folder / "solution" / "solve.sh"
        return path if path.is_file() else None

    @property
    def tests_dir(self) -> Path:
        return self.folder / "tests"

    @property
    def has_verifier(self) -> bool:
        return _has_tests(self.tests_dir) or self.has_test_script

    @property
    def needs_container(self) -> bool:
        """Whether only a container can run it: it names an image, or its only verifier
        is a test.sh (run in the environment's default image then)."""
        return self.container is not None or (
            self.has_test_script and not _has_tests(self.tests_dir)
        )

    @property
    def has_test_script(self) -> bool:
        """Whether its verifier is Terminal-Bench 2's `tests/test.sh` (run in a container)."""
        return has_test_script(self.folder)

    @property
    def instruction_text(self) -> str:
        """instruction.md as written (the spec's instruction adds `AGENT_NOTE`)."""
        return read_task_text(self.folder / "instruction.md").strip()


def read_task_text(path: Path) -> str:
    """A task's text file (instruction.md, task.toml, setup.sh, solve.sh) as UTF-8;
    `TaskFormatError` naming the file when it is not."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFormatError(
            f"{path} is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}): "
            "save it as UTF-8"
        ) from None


def load_tasks(
    path: str | Path | None = None, *, skip_docker: bool = False, note: str = AGENT_NOTE
) -> list[TerminalTask]:
    """Every task folder in `path` (or `path` itself if it is one), sorted by id.

    Args:
        path: a folder of task folders, or one task folder; None: the shipped suite.
        skip_docker: leave out a task that needs Docker Compose, with a
            `DockerTaskSkipped` warning, rather than raise.
        note: appended to every instruction (what a model needs to know about this
            environment).

    Returns:
        The tasks.

    Raises:
        TaskFormatError: `path` is not a folder, holds no task folder, or a task is
            malformed (what is missing is named).
        DockerRequiredError: a task has a compose file, without `skip_docker`.
    """
    root = Path(path) if path is not None else SHIPPED_TASKS
    if not root.is_dir():
        raise TaskFormatError(f"{root} is not a directory: give a task folder or a folder of them")
    folders = [root] if _is_task(root) else sorted(p for p in root.iterdir() if _is_task(p))
    if not folders:
        raise TaskFormatError(
            f"no task folders in {root}: a task folder holds instruction.md and task.toml"
        )
    tasks = []
    for folder in folders:
        try:
            tasks.append(load_task(folder, note=note))
        except DockerRequiredError as exc:
            if not skip_docker:
                raise
            warnings.warn(f"skipped: {exc}", DockerTaskSkipped, stacklevel=2)
    return tasks


def _is_task(path: Path) -> bool:
    return (
        path.is_dir()
        and not path.name.startswith((".", "_"))
        and (path / "instruction.md").is_file()
        and (path / "task.toml").is_file()
    )


def load_task(folder: str | Path, *, note: str = AGENT_NOTE) -> TerminalTask:
    """One task folder.

    Args:
        folder: the task's folder (instruction.md, task.toml, tests/, ...).
        note: appended to its instruction.

    Returns:
        The task.

    Raises:
        TaskFormatError: something is missing or malformed; the message says what.
        DockerRequiredError: the task has a compose file.
    """
    folder = Path(folder).resolve()
    config = _read_toml(folder / "task.toml")
    instruction = read_task_text(folder / "instruction.md").strip()
    if not instruction:
        raise TaskFormatError(f"{folder / 'instruction.md'} is empty: write the task there")
    if not _has_tests(folder / "tests") and not has_test_script(folder):
        raise TaskFormatError(
            f"task {folder.name} has no verifier: add tests/test.sh (writing "
            "/logs/verifier/reward.txt, run in the task's container) or pytest tests, "
            "tests/test_*.py (checking files below $TASK_WORKDIR)"
        )
    for script in (folder / "environment" / SETUP_SCRIPT, folder / "solution" / "solve.sh"):
        if script.is_file():
            read_task_text(script)  # refused now, with the task, rather than mid-run
    agent = _table(config, "agent", folder)
    verifier = _table(config, "verifier", folder)
    metadata = _table(config, "metadata", folder)
    environment = _table(config, "environment", folder)
    solution = _table(config, "solution", folder)
    allow_internet = network_allowed(config, folder)
    setup_timeout = _number(environment, "build_timeout_sec", DEFAULT_SETUP_TIMEOUT_S, folder)
    build_timeout = _number(environment, "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_S, folder)
    container = container_spec(folder, environment, build_timeout)
    spec = TaskSpec(
        id=folder.name,
        instruction=instruction + (note.replace(_OFFLINE, _ONLINE) if allow_internet else note),
        agent_timeout_s=_number(agent, "timeout_sec", 600.0, folder),
        verifier_timeout_s=_number(verifier, "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S, folder),
        max_turns=int(_number(agent, "max_turns", 50, folder)),
        difficulty=_text(metadata.get("difficulty")),
        category=_text(metadata.get("category")),
        metadata={
            "tags": list(metadata.get("tags", [])),
            "folder": str(folder),
        },
    )
    return TerminalTask(
        spec=spec,
        folder=folder,
        setup_timeout_s=setup_timeout,
        verifier_env=_env(verifier, folder),
        native_extensions=_flag(verifier, "native_extensions", folder),
        solution_env=_env(solution, folder),
        allow_internet=allow_internet,
        budget=_budget(environment, folder),
        container=container,
    )


def _budget(table: Mapping[str, Any], folder: Path) -> ResourceBudget:
    """The episode budget of `[environment]`, Terminal-Bench 2's defaults where unset
    (its older spellings `memory = "4G"` and `storage = "10G"` are read too)."""
    try:
        return ResourceBudget(
            memory_mb=_megabytes(table, "memory", DEFAULT_MEMORY_MB, folder),
            storage_mb=_megabytes(table, "storage", DEFAULT_STORAGE_MB, folder),
            cpus=_number(table, "cpus", DEFAULT_CPUS, folder),
        )
    except ConfigurationError as exc:
        raise TaskFormatError(f"{folder / 'task.toml'}: {exc}") from None


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", re.IGNORECASE)
_SIZE_MB = {"K": 1 / 1024, "": 1.0, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


def _megabytes(table: Mapping[str, Any], name: str, default: int, folder: Path) -> int:
    """`<name>_mb` (a number), or `<name>` as a size such as "4G" or "512M"."""
    if f"{name}_mb" in table or name not in table:
        return int(_number(table, f"{name}_mb", default, folder))
    value = table[name]
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise TaskFormatError(
            f'{folder / "task.toml"}: {name} must be a size such as "4G" or "512M" '
            f"(or give {name}_mb as a number), got {value!r}"
        )
    return max(int(float(match[1]) * _SIZE_MB[match[2].upper()]), 1)


def _has_tests(tests: Path) -> bool:
    return any(tests.glob("test_*.py")) or any(tests.glob("*_test.py"))


def inline_task(
    instruction: str,
    *,
    workdir: str | Path | None = None,
    max_turns: int = 30,
    timeout_s: float = 600.0,
    note: str = AGENT_NOTE,
) -> TerminalTask:
    """A task made from an instruction given inline (`turnbon run --instruction`): it
    starts in a copy of `workdir` (an empty directory when None) and has no verifier.

    The task lives in a temporary folder (removed when the process ends) whose
    `environment` links to `workdir`, so episodes copy the user's files and never
    change them."""
    text = instruction.strip()
    if not text:
        raise TaskFormatError("the instruction is empty: say what the agent should do")
    if max_turns < 1 or timeout_s <= 0:
        raise TaskFormatError("max_turns must be at least 1 and timeout_s positive")
    source = Path(workdir).resolve() if workdir is not None else None
    if source is not None and not source.is_dir():
        raise TaskFormatError(f"{source} is not a directory: --workdir takes a folder to copy")
    folder = Path(tempfile.mkdtemp(prefix="turnbon-inline-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "instruction.md").write_text(text + "\n", encoding="utf-8")
    if source is not None:
        (folder / "environment").symlink_to(source, target_is_directory=True)
    spec = TaskSpec(
        id="inline",
        instruction=text + note,
        agent_timeout_s=timeout_s,
        max_turns=max_turns,
        metadata={
            "folder": str(folder),
            "workdir": str(source) if source else None,
            "verifier": False,
        },
    )
    return TerminalTask(spec=spec, folder=folder)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_task_text(path))
    except FileNotFoundError as exc:
        raise TaskFormatError(f"{path} is missing: every task needs a task.toml") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(f"{path} is not valid TOML ({exc}): fix it") from exc


def _table(config: Mapping[str, Any], name: str, folder: Path) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise TaskFormatError(f"{folder / 'task.toml'}: [{name}] must be a table")
    return value


def _number(table: Mapping[str, Any], key: str, default: float, folder: Path) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskFormatError(f"{folder / 'task.toml'}: {key} must be a positive number")
    return float(value)


def _flag(table: Mapping[str, Any], key: str, folder: Path) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise TaskFormatError(f"{folder / 'task.toml'}: {key} must be true or false")
    return value


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _env(table: Mapping[str, Any], folder: Path) -> dict[str, str]:
    """A task's own `env = {...}`: literal values (a `${VAR}` is not expanded, so
    nothing of the host's environment reaches the task through it)."""
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise TaskFormatError(f"{folder / 'task.toml'}: env must be a table of strings")
    return {str(k): v for k, v in env.items()}

"""TerminalEnvironment and its episodes: start, setup, tools, verifier, close."""

from __future__ import annotations

import asyncio
import os
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from turnbon_graph.bench.environment import Environment, Episode, TaskSpec
from turnbon_graph.bench.registry import load_environment
from turnbon_terminal import (
    SetupScriptError,
    StubPolicy,
    TerminalEnvironment,
    TerminalEpisode,
    environment,
)
from turnbon_terminal.host.workroot import default_work_root

ROOT = os.geteuid() == 0


def write_task(
    root: Path,
    name: str,
    test: str,
    *,
    setup: str | None = None,
    verifier_timeout: float = 30,
    files: dict[str, str] | None = None,
) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "solution").mkdir()
    (folder / "instruction.md").write_text(f"Task {name}.\n")
    (folder / "task.toml").write_text(
        f'[metadata]\ndifficulty = "easy"\ncategory = "test"\n\n'
        f"[verifier]\ntimeout_sec = {verifier_timeout}\n"
    )
    (folder / "solution" / "solve.sh").write_text("echo solved > out.txt\n")
    (folder / "tests" / f"test_{name.replace('-', '_')}.py").write_text(textwrap.dedent(test))
    if setup is not None:
        (folder / "environment" / "setup.sh").write_text(setup)
    for path, content in (files or {}).items():
        (folder / "environment" / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / "environment" / path).write_text(content)
    return folder


def spec(env: TerminalEnvironment, task_id: str) -> TaskSpec:
    return next(t for t in env.tasks() if t.id == task_id)


async def test_implements_the_environment_protocol() -> None:
    env = environment(None)
    assert isinstance(env, Environment) and env.name == "terminal"
    assert env.isolated == ROOT
    episode = await env.start(spec(env, "greet-script"), 0)
    try:
        assert isinstance(episode, Episode) and isinstance(episode, TerminalEpisode)
        assert [t.name for t in episode.tools] == ["shell"]
    finally:
        await episode.close()


def test_the_entry_point_factory_loads_through_the_cli(tmp_path: Path) -> None:
    entry = EntryPoint("terminal", "turnbon_terminal:environment", "turnbon.environments")
    env = load_environment("terminal", None, available=[entry])
    assert isinstance(env, TerminalEnvironment) and len(env.tasks()) >= 24
    assert isinstance(env.stub_policy(), StubPolicy)  # what `--model stub` scripts
    write_task(tmp_path, "only", "def test_x() -> None:\n    pass\n")
    mine = load_environment("terminal", str(tmp_path), available=[entry])
    assert [t.id for t in mine.tasks()] == ["only"]


async def test_an_episode_starts_from_the_task_files_after_setup() -> None:
    env = TerminalEnvironment()
    episode = await env.start(spec(env, "git-first-commit"), 3)
    workdir = episode.workdir
    try:
        assert (workdir / "project" / "README.md").is_file()
        assert not (workdir / "setup.sh").exists()
        result = await episode.run("git config --global user.email; ls -a")
        assert result.output.splitlines()[0] == "agent@example.com"
        if ROOT:
            assert workdir.stat().st_uid == episode.sandbox.uid
            assert (workdir / "project" / "README.md").stat().st_uid == episode.sandbox.uid
        assert workdir.stat().st_mode & 0o777 == 0o700
        verdict = await episode.verify()
        assert not verdict.passed and verdict.error is None
        assert "failed" in verdict.output
    finally:
        await episode.close()
    assert not workdir.exists()
    await episode.close()  # closing twice is harmless


async def test_a_failing_setup_script_stops_the_start_and_cleans_up(tmp_path: Path) -> None:
    write_task(
        tmp_path, "bad-setup", "def test_x() -> None:\n    pass\n", setup="echo boom\nexit 3\n"
    )
    env = TerminalEnvironment(tmp_path)
    before = set(_episode_dirs())
    with pytest.raises(SetupScriptError, match=r"setup\.sh of task bad-setup failed") as caught:
        await env.start(spec(env, "bad-setup"), 0)
    assert "boom" in str(caught.value) and "[exit code 3]" in str(caught.value)
    assert not {p for p in set(_episode_dirs()) - before if p.name.startswith("bad-setup-")}


async def test_slow_tests_come_back_as_a_fail_verdict(tmp_path: Path) -> None:
    test = """
        import time

        def test_slow() -> None:
            time.sleep(60)
    """
    write_task(tmp_path, "slow", test, verifier_timeout=4)
    env = TerminalEnvironment(tmp_path)
    episode = await env.start(spec(env, "slow"), 0)
    try:
        verdict = await episode.verify()
    finally:
        await episode.close()
    # The tests' own slowness (the deliverable's, as far as the verifier can tell): a FAIL
    # within the task's time, never an error or the runner's timeout.
    assert not verdict.passed and verdict.error is None
    assert verdict.reason is not None and "the tests did not finish within" in verdict.reason


async def test_the_verifier_has_no_secrets_and_ignores_planted_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-verifier-3e1d")
    test = """
        import os
        from pathlib import Path

        def test_clean_environment() -> None:
            assert "sk-test-verifier-3e1d" not in os.environ.values()
            assert "OPENAI_API_KEY" not in os.environ
            workdir = Path(os.environ["TASK_WORKDIR"])
            assert (workdir / "out.txt").read_text() == "solved\\n"
            assert os.environ["MODE"] == "strict"
    """
    folder = write_task(tmp_path, "clean", test)
    with (folder / "task.toml").open("a") as handle:
        handle.write('env = { MODE = "strict" }\n')
    env = TerminalEnvironment(tmp_path)
    episode = await env.start(spec(env, "clean"), 0)
    try:
        assert (await episode.run_solution()).ok
        # An agent planting a pytest.py, a conftest.py or an ini file in the workdir
        # changes nothing: the verifier runs elsewhere, isolated (-I), with its own ini file.
        await episode.run(
            "echo 'raise SystemExit(0)' > pytest.py; echo 'raise RuntimeError' > conftest.py;"
            " printf '[pytest]\\naddopts = -k nothing\\n' > pytest.ini"
        )
        verdict = await episode.verify()
    finally:
        await episode.close()
    assert verdict.passed, verdict.output
    assert "1 passed" in verdict.output


async def test_a_verifier_that_cannot_run_is_an_error_verdict(tmp_path: Path) -> None:
    write_task(tmp_path, "nopython", "def test_x() -> None:\n    pass\n")
    env = TerminalEnvironment(tmp_path, verifier_python="/nonexistent/python3")
    episode = await env.start(spec(env, "nopython"), 0)
    try:
        verdict = await episode.verify()
    finally:
        await episode.close()
    assert not verdict.passed
    assert verdict.error is not None
    assert "no Python with pytest" in verdict.error and "verifier_python=" in verdict.error


def _episode_dirs() -> list[Path]:
    root = default_work_root() / "episodes"
    return list(root.iterdir()) if root.is_dir() else []


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.1, 0.3])
async def test_cancelling_a_start_leaves_nothing_behind(delay: float) -> None:
    env = TerminalEnvironment()
    before = set(_episode_dirs())
    starting = asyncio.create_task(env.start(spec(env, "git-resolve-conflict"), 7))
    await asyncio.sleep(delay)
    starting.cancel()
    try:
        episode = await starting
    except asyncio.CancelledError:
        pass
    else:  # it was done before the cancel arrived
        await episode.close()
    left = {
        p for p in set(_episode_dirs()) - before if p.name.startswith("git-resolve-conflict-7-")
    }
    assert not left

"""The terminal task loader: the shipped suite, Terminal-Bench 2 folders, refusals."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from turnbon_graph.errors import TurnBoNError
from turnbon_terminal import (
    SHIPPED_TASKS,
    DockerRequiredError,
    DockerTaskSkipped,
    TaskFormatError,
    load_tasks,
)
from turnbon_terminal.task.folders import AGENT_NOTE
from turnbon_terminal.task.tb2 import ContainerSpec, NetworkModeWarning

TB2_TOML = """\
version = "2.0"

[metadata]
author_name = "anonymous"
difficulty = "hard"
category = "system-administration"
tags = ["rsync"]

[agent]
timeout_sec = 1800.0

[verifier]
timeout_sec = 900.0
env = { MODE = "strict" }

[environment]
allow_internet = false
build_timeout_sec = 900.0
cpus = 2
memory_mb = 4096
workdir = "/app"
"""


def make_task(root: Path, name: str, toml: str = TB2_TOML, *, dockerfile: bool = False) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "instruction.md").write_text(f"Do the {name} thing.\n")
    (folder / "task.toml").write_text(toml)
    (folder / "tests" / "test_outputs.py").write_text("def test_x() -> None:\n    pass\n")
    if dockerfile:
        (folder / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    return folder


def test_the_shipped_suite_is_graded_and_complete() -> None:
    tasks = load_tasks()
    assert len(tasks) >= 24
    assert len({t.id for t in tasks}) == len(tasks)
    levels = [t.spec.difficulty for t in tasks]
    assert {level: levels.count(level) for level in set(levels)} == {
        "easy": 8,
        "medium": 12,
        "hard": 6,
    }
    categories = {t.spec.category for t in tasks}
    assert {"git", "sqlite", "debugging", "output-format", "data-wrangling"} <= categories
    for task in tasks:
        assert task.folder.parent == SHIPPED_TASKS
        assert task.solution_script is not None, task.id
        assert task.spec.instruction == task.instruction_text + AGENT_NOTE
        assert "$TASK_WORKDIR" in task.spec.instruction
        assert not (task.environment_dir / "Dockerfile").exists()


def test_python_files_of_the_suite_have_unique_names() -> None:
    # mypy checks them as top-level modules: two with one name would clash.
    names = [p.name for p in SHIPPED_TASKS.rglob("*.py")]
    assert len(names) == len(set(names))


def test_reads_a_terminal_bench_2_task_toml(tmp_path: Path) -> None:
    make_task(tmp_path, "tb2-task")
    (task,) = load_tasks(tmp_path)
    spec = task.spec
    assert (spec.id, spec.difficulty, spec.category) == (
        "tb2-task",
        "hard",
        "system-administration",
    )
    assert (spec.agent_timeout_s, spec.verifier_timeout_s) == (1800.0, 900.0)
    assert spec.metadata["tags"] == ["rsync"]
    assert task.setup_timeout_s == 900.0
    assert task.verifier_env == {"MODE": "strict"}
    assert load_tasks(tmp_path / "tb2-task")[0].id == "tb2-task"  # one task folder


def test_the_agent_is_told_whether_the_task_has_a_network(tmp_path: Path) -> None:
    make_task(tmp_path, "offline")
    make_task(
        tmp_path, "online", TB2_TOML.replace("allow_internet = false", "allow_internet = true")
    )
    offline, online = sorted(load_tasks(tmp_path), key=lambda t: t.id)
    assert "There is no network." in offline.spec.instruction
    assert "There is no network." not in online.spec.instruction
    assert "The network is reachable." in online.spec.instruction


def test_a_task_with_a_dockerfile_or_an_image_runs_in_its_container(tmp_path: Path) -> None:
    make_task(tmp_path, "plain")
    built = make_task(tmp_path, "dockerized", dockerfile=True)
    make_task(tmp_path, "image", TB2_TOML + 'docker_image = "org/name:tag"\n')
    dockerized, image, plain = sorted(load_tasks(tmp_path), key=lambda t: t.id)
    assert plain.container is None
    assert dockerized.container == ContainerSpec(
        dockerfile=built / "environment" / "Dockerfile",
        workdir="/app",
        build_timeout_s=900.0,
    )
    assert image.container is not None and image.container.image == "org/name:tag"
    assert image.container.dockerfile is None
    assert (image.budget.cpus, image.budget.memory_mb) == (2, 4096)


def test_a_compose_file_is_refused_or_skipped(tmp_path: Path) -> None:
    make_task(tmp_path, "plain")
    compose = make_task(tmp_path, "compose", dockerfile=True)
    (compose / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(DockerRequiredError) as caught:
        load_tasks(tmp_path)
    message = str(caught.value)
    assert "compose" in message and "environment/docker-compose.yaml" in message
    assert "skip_docker=True" in message and "harbor run" in message
    assert isinstance(caught.value, TurnBoNError)
    with pytest.warns(DockerTaskSkipped, match="compose"):
        tasks = load_tasks(tmp_path, skip_docker=True)
    assert [t.id for t in tasks] == ["plain"]


@pytest.mark.parametrize(
    ("lines", "network"),
    [
        ("", False),
        ("allow_internet = true\n", True),
        ('network_mode = "public"\n', True),
        ('network_mode = "no-network"\nallow_internet = true\n', False),
    ],
)
def test_the_network_follows_network_mode_then_allow_internet(
    tmp_path: Path, lines: str, network: bool
) -> None:
    toml = TB2_TOML.replace("allow_internet = false\n", lines)
    make_task(tmp_path, "net", toml, dockerfile=True)
    (task,) = load_tasks(tmp_path)
    assert task.allow_internet is network
    assert ("The network is reachable." in task.spec.instruction) is network


def test_container_settings_that_cannot_hold_are_refused_or_warned(tmp_path: Path) -> None:
    make_task(tmp_path, "a", TB2_TOML + 'network_mode = "allowlist"\n', dockerfile=True)
    with pytest.raises(TaskFormatError, match="'allowlist' is not supported"):
        load_tasks(tmp_path / "a")
    make_task(tmp_path, "b", TB2_TOML + 'env = { HOME_KEY = "${HOME}" }\n', dockerfile=True)
    with pytest.raises(TaskFormatError, match="takes a value from the host"):
        load_tasks(tmp_path / "b")
    phase = TB2_TOML.replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n')
    make_task(tmp_path, "c", phase, dockerfile=True)
    with pytest.warns(NetworkModeWarning, match=r"\[verifier\] network_mode = 'public'"):
        load_tasks(tmp_path / "c")


def test_a_test_script_is_a_verifier(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "tb2", dockerfile=True)
    (folder / "tests" / "test_outputs.py").unlink()
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task,) = load_tasks(tmp_path)
    assert task.has_test_script and task.has_verifier


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("[agent\n", "not valid TOML"),
        ("[agent]\ntimeout_sec = -1\n", "positive number"),
        ("agent = 3\n", "must be a table"),
        ("[verifier]\nenv = { N = 1 }\n", "table of strings"),
        ('[verifier]\nnative_extensions = "yes"\n', "native_extensions must be true or false"),
    ],
)
def test_malformed_task_toml_says_what_to_fix(tmp_path: Path, toml: str, problem: str) -> None:
    make_task(tmp_path, "broken", toml)
    with pytest.raises(TaskFormatError, match=problem):
        load_tasks(tmp_path)


def test_a_task_without_verifier_or_folder_is_refused(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "no-tests")
    (folder / "tests" / "test_outputs.py").unlink()
    with pytest.raises(TaskFormatError, match=r"no verifier: add tests/test\.sh"):
        load_tasks(tmp_path)
    with pytest.raises(TaskFormatError, match="not a directory"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(TaskFormatError, match="no task folders"):
        load_tasks(tmp_path / "no-tests" / "tests")


def test_docker_skipping_warns_once_per_task(tmp_path: Path) -> None:
    compose = make_task(tmp_path, "a", dockerfile=True)
    (compose / "environment" / "compose.yaml").write_text("services: {}\n")
    make_task(tmp_path, "b")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        load_tasks(tmp_path, skip_docker=True)
    assert len([w for w in seen if issubclass(w.category, DockerTaskSkipped)]) == 1

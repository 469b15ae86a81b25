"""A task's budget from its task.toml `[environment]`: Terminal-Bench 2's keys and
defaults, its older size spellings, and a clear error for a value that cannot be one."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_terminal.errors import TaskFormatError
from turnbon_terminal.task.budget import ResourceBudget
from turnbon_terminal.task.folders import load_task


def task(tmp_path: Path, environment: str) -> Path:
    folder = tmp_path / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test_it.py").write_text("def test_it() -> None:\n    pass\n")
    (folder / "task.toml").write_text(f"[environment]\n{environment}\n")
    return folder


def test_the_keys_of_terminal_bench_2(tmp_path: Path) -> None:
    loaded = load_task(task(tmp_path, "memory_mb = 512\nstorage_mb = 4096\ncpus = 0.5"))
    assert loaded.budget == ResourceBudget(memory_mb=512, storage_mb=4096, cpus=0.5)


def test_defaults_are_terminal_bench_2s(tmp_path: Path) -> None:
    assert load_task(task(tmp_path, "")).budget == ResourceBudget(2048, 10240, 1.0)


@pytest.mark.parametrize(
    ("written", "memory_mb"), [('"4G"', 4096), ('"512M"', 512), ('"1.5GiB"', 1536)]
)
def test_the_older_size_spelling(tmp_path: Path, written: str, memory_mb: int) -> None:
    loaded = load_task(task(tmp_path, f'memory = {written}\nstorage = "20G"'))
    assert loaded.budget.memory_mb == memory_mb and loaded.budget.storage_mb == 20480


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ("memory_mb = 0", "memory_mb must be a positive number"),
        ('memory_mb = "lots"', "memory_mb must be a positive number"),
        ("memory_mb = 8", "memory_mb >= 64"),
        ("cpus = -1", "cpus must be a positive number"),
        ('storage = "big"', 'storage must be a size such as "4G"'),
    ],
)
def test_a_bad_budget_names_the_key(tmp_path: Path, environment: str, said: str) -> None:
    with pytest.raises(TaskFormatError, match=r"task\.toml") as raised:
        load_task(task(tmp_path, environment))
    assert said in str(raised.value)

"""Verifier of the fix-slugify task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slugs_under_test", WORKDIR / "slugs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_tests_unchanged_and_passing() -> None:
    shipped = (WORKDIR / "test_slugs.py").read_bytes()
    assert (
        hashlib.sha256(shipped).hexdigest()
        == "bae88f55655b4f0e52e971aa3de3d6d2124c43e6d86ee8e2ff2c52dd6e70a4d3"
    ), "test_slugs.py was changed"
    result = subprocess.run(
        [sys.executable, "-m", "unittest", "-q", "test_slugs"],
        cwd=WORKDIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("title", "kwargs", "expected"),
    [
        ("Hello, World!", {}, "hello-world"),
        ("  --Top 10 TIPS--  ", {}, "top-10-tips"),
        ("Ärger über Öl", {}, "arger-uber-ol"),
        ("", {}, "untitled"),
        ("a" * 60, {}, "a" * 50),
        ("one two three", {"max_length": 4}, "one"),
        ("one two three", {"max_length": 7}, "one-two"),
        ("x-y", {"max_length": 3}, "x-y"),
        ("MiXeD_case.file", {}, "mixed-case-file"),
    ],
)
def test_slugify(title: str, kwargs: dict[str, int], expected: str) -> None:
    assert load().slugify(title, **kwargs) == expected

"""How long the terminal verifier takes, from `verify()` to its verdict.

Runs `--runs` episodes of one small task (two tests: a file and a module the tests
import), each answered rightly, and times each `verify()`: every process of the episode
killed, the tests copied, the work folder scanned, the tests run in a fresh sandbox under
the watch, the report read. The first episode's start also finds the verifier's Python
and fills its bytecode cache (in a new work root, by default), so it is shown apart.

    python benchmarks/verifier_time.py              # 11 verifications
    python benchmarks/verifier_time.py --runs 21
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

from turnbon_terminal import TerminalEnvironment

TESTS = """
import importlib.util
import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_the_answer_file() -> None:
    assert (WORKDIR / "out.txt").read_text().strip() == "42"


def test_the_answer_module() -> None:
    spec = importlib.util.spec_from_file_location("answer", WORKDIR / "answer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.answer() == 42
"""
ANSWER = "echo 42 > out.txt; printf 'def answer():\\n    return 42\\n' > answer.py"


def _task(root: Path) -> None:
    folder = root / "answer"
    for part in ("tests", "environment"):
        (folder / part).mkdir(parents=True)
    (folder / "instruction.md").write_text("Write 42 to out.txt and answer.py.\n")
    (folder / "task.toml").write_text("[verifier]\ntimeout_sec = 60\n")
    (folder / "tests" / "test_answer.py").write_text(textwrap.dedent(TESTS))


async def main(runs: int, work_root: str | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        _task(Path(scratch))
        env = TerminalEnvironment(scratch, work_root=work_root)
        times = []
        starts = []
        for trial in range(runs):
            began = time.perf_counter()
            episode = await env.start(env.tasks()[0], trial)
            starts.append(time.perf_counter() - began)
            try:
                assert (await episode.run(ANSWER)).ok
                began = time.perf_counter()
                verdict = await episode.verify()
                times.append(time.perf_counter() - began)
                assert verdict.passed, verdict
            finally:
                await episode.close()
    print(
        f"first episode's start: {starts[0]:.2f} s (then median "
        f"{statistics.median(starts[1:]):.3f} s)"
    )
    print(
        f"verification: median {statistics.median(times):.3f} s (min {min(times):.3f}, "
        f"max {max(times):.3f}, {len(times)} verifications)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--work-root", help="default: a new folder (a cold bytecode cache)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verifier-time-") as fresh:
        Path(fresh).chmod(0o711)  # the episodes' uids pass through to their folders
        asyncio.run(main(max(options.runs, 2), options.work_root or f"{fresh}/root"))

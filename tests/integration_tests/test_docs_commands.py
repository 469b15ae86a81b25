"""A command the docs show with its output gives that output: the terminal environment's
seeded stub run, on docs/terminal.md and in integrations/turnbon_terminal/README.md."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "terminal.md"
PACKAGE_README = ROOT / "integrations" / "turnbon_terminal" / "README.md"
TURNBON = Path(sys.executable).with_name("turnbon")


def shown_on_the_page() -> tuple[str, str]:
    """The seeded `turnbon bench` command and the summary line the page says it prints."""
    found = re.search(
        r"^```bash\n\.venv/bin/(turnbon bench --env terminal --model stub [^\n]*)\n```\n"
        r".*?^```text\n([^\n]*)\n```",
        PAGE.read_text(encoding="utf-8"),
        re.DOTALL | re.MULTILINE,
    )
    assert found is not None
    return found[1], found[2]


def test_the_package_readme_shows_the_same_command_and_output() -> None:
    command, summary = shown_on_the_page()
    assert f"{command}\n# {summary}\n" in PACKAGE_README.read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the sandbox needs bubblewrap")
def test_the_seeded_stub_bench_prints_what_the_page_shows(tmp_path: Path) -> None:
    command, summary = shown_on_the_page()
    arguments = shlex.split(command)[1:]
    assert "--concurrency" in arguments and "1" in arguments  # seeded and one at a time
    done = subprocess.run(
        [str(TURNBON), *arguments, "--run", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert summary in done.stdout.splitlines()

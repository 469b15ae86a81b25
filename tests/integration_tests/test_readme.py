"""The runnable examples of the README, the docs pages and the integrations' READMEs run
as written, offline, and print what the page says they print.

A runnable example is a ```python block right after the line MARKER. When the block is
followed by "It prints:" and a ```text block, the example's output must end with those
lines. Every other Python block of those pages is checked statically
(tests/unit_tests/test_docs_examples.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- example: runs offline in tests/integration_tests/test_readme.py -->"
RECORDED = ("example-run", "stub-report")
"""docs/ folders that scripts regenerate: not pages with examples."""


def pages() -> list[Path]:
    docs = [
        path
        for path in sorted((ROOT / "docs").rglob("*.md"))
        if not set(path.relative_to(ROOT / "docs").parts) & set(RECORDED)
    ]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "integrations").glob("*/README.md"))]


@dataclass(frozen=True)
class Example:
    page: Path
    number: int
    code: str
    prints: tuple[str, ...] | None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}#{self.number}"

    @property
    def needs_the_sandbox(self) -> bool:
        return "turnbon_terminal" in self.code


EXAMPLE = re.compile(
    re.escape(MARKER) + r"\n```python\n(?P<code>.*?)^```\n"
    r"(?:\nIt prints:\n\n```text\n(?P<prints>.*?)^```\n)?",
    re.DOTALL | re.MULTILINE,
)


def runnable_examples() -> list[Example]:
    found = []
    for page in pages():
        for number, match in enumerate(EXAMPLE.finditer(page.read_text(encoding="utf-8"))):
            prints = match["prints"]
            lines = tuple(prints.splitlines()) if prints is not None else None
            found.append(Example(page, number, match["code"], lines))
    return found


EXAMPLES = runnable_examples()


def skip_without_the_sandbox(example: Example) -> None:
    if example.needs_the_sandbox and shutil.which("bwrap") is None:
        pytest.skip("the terminal environment needs bubblewrap: make setup-bwrap")


def test_every_marker_is_on_a_python_block() -> None:
    markers = sum(page.read_text(encoding="utf-8").count(MARKER) for page in pages())
    assert markers == len(EXAMPLES)


def test_the_readme_and_the_door_pages_have_their_runnable_examples() -> None:
    with_examples = {example.page.relative_to(ROOT).as_posix() for example in EXAMPLES}
    assert {
        "README.md",
        "docs/graph.md",
        "docs/middleware.md",
        "docs/chat-model.md",
        "docs/litellm-provider.md",
        "docs/serve.md",
        "docs/router.md",
        "docs/selectors.md",
        "docs/options.md",
        "docs/terminal.md",
    } <= with_examples
    assert all(example.prints for example in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.id)
def test_example_runs_and_prints_what_its_page_says(
    example: Example,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    skip_without_the_sandbox(example)
    monkeypatch.chdir(tmp_path)  # examples that write files (traces, checkpoints) write here
    exec(compile(example.code, example.id, "exec"), {"__name__": "__example__"})
    out = capsys.readouterr().out.splitlines()
    if example.prints is not None:
        assert out[-len(example.prints) :] == list(example.prints)


def run_example(
    example: Example, directory: Path, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """`example` run as a script of its own in `directory` (after `prefix`, a command that
    runs the rest), with no LiteLLM setting in the environment: the library must not let
    LiteLLM fetch its price list at import."""
    script = directory / "example.py"
    script.write_text(example.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    return subprocess.run(
        [*prefix, sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=directory,
        timeout=600,
    )


def run_without_network(example: Example, directory: Path) -> subprocess.CompletedProcess[str]:
    """`run_example` in a network namespace of its own: only loopback, up."""
    in_namespace = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$1"']
    return run_example(example, directory, in_namespace)


def test_the_middleware_example_prints_no_litellm_banner(tmp_path: Path) -> None:
    """The agent's chat model is no LiteLLM model id (its selector's is `openai-chat:stub`):
    looking it up in LiteLLM's model map (does it take a `response_format`?) must not
    print LiteLLM's red "Provider List" banner, which came first in this example's
    output."""
    example = next(e for e in EXAMPLES if e.page.name == "middleware.md")
    result = run_example(example, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Provider List" not in result.stdout + result.stderr


def test_the_offline_examples_need_no_network(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network namespace")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow a new network namespace (not root?)")
    chosen = [e for e in EXAMPLES if not (e.needs_the_sandbox and shutil.which("bwrap") is None)]
    directories = []
    for example in chosen:
        directory = tmp_path / f"{example.page.stem}-{example.number}"
        directory.mkdir()
        directories.append(directory)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(run_without_network, chosen, directories))
    for example, result in zip(chosen, done, strict=True):
        assert result.returncode == 0, (example.id, result.stderr[-2000:])
        if example.prints is not None:
            assert result.stdout.splitlines()[-len(example.prints) :] == list(example.prints)
        # LiteLLM falls back to its bundled map when a fetch fails, and says so: it must
        # not have tried.
        assert "model cost map" not in result.stderr, example.id
        assert "Provider List" not in result.stdout + result.stderr, example.id

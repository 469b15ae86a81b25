"""The README's runnable examples run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- readme-example: runs in tests/integration_tests/test_readme.py -->"


def runnable_examples() -> list[str]:
    text = README.read_text()
    return re.findall(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.DOTALL)


# What each runnable example's last line starts with, by a name only that example uses.
LAST_LINES = {
    "create_turnbon_agent(": "unanimous 0 ",  # the graph agent
    "TurnBoNMiddleware(": "unanimous 0 ",  # create_agent with the middleware
    "TurnBoNProvider(": "llm:openai/stub 0",  # the LiteLLM provider
    "BackgroundServer(": "54 llm:openai/stub",  # turnbon serve through the OpenAI SDK
}


def last_line_of(code: str) -> str:
    (expected,) = [line for name, line in LAST_LINES.items() if name in code]
    return expected


def test_the_readme_has_its_runnable_examples() -> None:
    examples = runnable_examples()
    assert len(examples) == len(LAST_LINES)
    assert all(last_line_of(code) for code in examples)


@pytest.mark.parametrize("code", runnable_examples())
def test_readme_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(last_line_of(code))
    if "unanimous" in last_line_of(code):
        # One line per turn: a tool call the LLM selector chose, then the final answer.
        assert out[0].startswith(("llm:openai/stub ", "llm:openai-chat:stub "))
        assert len(out) == 2


def test_the_offline_examples_need_no_network(tmp_path: Path) -> None:
    # In a network namespace of their own (only loopback, up), with no LiteLLM setting in
    # the environment: the library must not let LiteLLM fetch its price list at import.
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network namespace")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow a new network namespace (not root?)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    for number, code in enumerate(runnable_examples()):
        script = tmp_path / f"example_{number}.py"
        script.write_text(code)
        done = subprocess.run(
            [
                "unshare",
                "-n",
                "sh",
                "-c",
                'ip link set lo up && exec "$0" "$1"',
                sys.executable,
                str(script),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines()[-1].startswith(last_line_of(code))
        # LiteLLM falls back to its bundled map when a fetch fails, and says so: it must
        # not have tried.
        assert "model cost map" not in done.stderr

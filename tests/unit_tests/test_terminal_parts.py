"""The terminal sandbox's small parts: secret filtering, output capping, result text,
the bwrap options and the refusal without bwrap."""

from __future__ import annotations

from pathlib import Path

import pytest

import turnbon_terminal
from turnbon_graph.errors import ConfigurationError
from turnbon_terminal import CommandResult, SandboxError, SandboxSettings, SecretEnvironmentError
from turnbon_terminal.host.bwrap import Layout, find_tools
from turnbon_terminal.output import CappedOutput
from turnbon_terminal.task.envvars import checked, looks_secret, sandbox_env

SECRET_NAMES = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GITHUB_TOKEN",
    "HF_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "MY_CLIENT_SECRET",
    "DB_PASSWORD",
    "AZURE_OPENAI_ENDPOINT",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "STRIPE_KEY",
]
PLAIN_NAMES = ["PATH", "LANG", "HOME", "TASK_WORKDIR", "GIT_AUTHOR_NAME", "MODE", "TZ"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_looking_names(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_plain_names(name: str) -> None:
    assert not looks_secret(name)


def test_the_environment_is_an_allow_list(tmp_path: Path) -> None:
    parent = {name: "s3cr3t-value" for name in SECRET_NAMES}
    parent |= {"LANG": "de_DE.UTF-8", "PYTHONPATH": "/root/x", "LD_PRELOAD": "/x.so"}
    env = sandbox_env(workdir=tmp_path / "w", tmpdir=tmp_path / "t", parent=parent)
    assert "s3cr3t-value" not in env.values()
    assert env["LANG"] == "de_DE.UTF-8"
    assert env["HOME"] == env["TASK_WORKDIR"] == str(tmp_path / "w")
    assert env["TMPDIR"] == str(tmp_path / "t")
    assert "PYTHONPATH" not in env and "LD_PRELOAD" not in env
    assert "/root" not in env["PATH"]


def test_extra_variables_with_secret_names_are_refused() -> None:
    assert checked({"MODE": "fast"}, origin="test") == {"MODE": "fast"}
    with pytest.raises(SecretEnvironmentError, match="OPENAI_API_KEY looks like a secret"):
        checked({"OPENAI_API_KEY": "sk-1"}, origin="test")
    with pytest.raises(ConfigurationError):
        SandboxSettings(env={"GH_TOKEN": "x"})


def test_capped_output_keeps_head_and_tail() -> None:
    out = CappedOutput(keep=20)
    for i in range(100):
        out.add(f"{i:03d}\n".encode())
    text = out.text()
    assert text.startswith("000\n001\n")
    assert text.endswith("098\n099\n")
    assert "[... 380 bytes of output cut: the first 10 and the last 10 bytes are shown ...]" in text
    out.freeze()
    out.add(b"later")
    assert out.total == 405 and out.seen == 400 and "later" not in out.text()


def test_short_output_is_whole() -> None:
    out = CappedOutput(keep=100)
    out.add("héllo\n".encode())
    assert out.text() == "héllo\n"


def test_rendered_results() -> None:
    plain = CommandResult(output="hi\n", exit_code=0, timeout=60)
    assert plain.render() == "hi\n[exit code 0]"
    assert (
        CommandResult(output="", exit_code=3, timeout=60).render() == "(no output)\n[exit code 3]"
    )
    hung = CommandResult(output="", exit_code=-9, timeout=1.5, timed_out=True)
    assert hung.render().splitlines() == [
        "(no output)",
        "[timed out after 1.5 s: the command was killed]",
        "[exit code 137 (killed by SIGKILL)]",
    ]
    flood = CommandResult(output="y\n", exit_code=-9, timeout=60, flooded=True, hard_limit=1 << 20)
    assert "[more than 1 MiB of output: the command was killed]" in flood.render()
    assert not hung.ok and not flood.ok and plain.ok


def test_without_bwrap_the_sandbox_refuses_to_start_and_says_how_to_install_it(
    tmp_path: Path,
) -> None:
    with pytest.raises(SandboxError, match=r"apt-get install -y bubblewrap") as caught:
        find_tools(str(tmp_path))
    assert "sandbox='uid'" in str(caught.value)


def test_the_bwrap_layout() -> None:
    work, tests = Path("/tmp/x/work"), Path("/tmp/x/verify/tests")
    package = Path(turnbon_terminal.__file__).parent
    options = Layout(
        writable=[work], readonly=[tests], hidden=[Path("/usr/lib"), package], env={"A": "b"}
    ).options()
    text = " ".join(options)
    assert "--unshare-user" in options and "--unshare-pid" in options
    assert "--unshare-net" in options and "--die-with-parent" in options
    assert "--ro-bind /usr /usr" in text and "--proc /proc" in text
    assert f"--bind {work} {work}" in text and f"--ro-bind {tests} {tests}" in text
    assert "--tmpfs /usr/lib --remount-ro /usr/lib" in text  # below /usr: masked
    assert str(package) not in text  # not below a system directory: never in the sandbox
    assert options[options.index("--clearenv") + 1 :] == ["--setenv", "A", "b"]
    shared = Layout(writable=[work], network=True).options()
    assert "--unshare-net" not in shared

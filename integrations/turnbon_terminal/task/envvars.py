"""The environment a sandboxed command sees: built from an allow-list, never inherited.

Nothing of the parent's environment reaches a command except the locale and time-zone
variables named in `COPIED`; API keys, tokens and cloud credentials therefore cannot
leak through `env`, `printenv` or `/proc/self/environ`. Variables a caller adds on
purpose are checked against `looks_secret` so a key is not passed in by mistake.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.errors import SecretEnvironmentError

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""A fixed PATH: the parent's may point into directories the sandbox user cannot enter
(a pyenv under /root) or hold tools that read credentials from the parent's home."""

COPIED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
"""The only variables copied from the parent (when set and not secret-looking)."""

_SECRET_WORDS = {
    "KEY",
    "KEYS",
    "APIKEY",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "SIGNATURE",
}
_SECRET_PREFIXES = re.compile(
    r"^(AWS|OPENAI|ANTHROPIC|AZURE|GOOGLE|GCP|GCLOUD|GEMINI|VERTEX|VERTEXAI|HF|HUGGINGFACE|"
    r"HUGGING_FACE|GITHUB|GH|GITLAB|COHERE|CO|MISTRAL|GROQ|TOGETHER|TOGETHERAI|REPLICATE|"
    r"DEEPSEEK|XAI|FIREWORKS|OPENROUTER|PERPLEXITY|PPLX|VOYAGE|LITELLM|LANGCHAIN|LANGSMITH|"
    r"LANGFUSE|WANDB|DATABRICKS|SNOWFLAKE|CLOUDFLARE|CF|DOCKER|NPM|PYPI|TWINE|SSH|GPG|"
    r"DAYTONA|MODAL|E2B)_"
)
_SUBSTRINGS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY")


def looks_secret(name: str) -> bool:
    """True for names like `*_API_KEY`, `*_TOKEN`, `*SECRET*`, `AWS_*`, `OPENAI_*`..."""
    upper = name.upper()
    if any(s in upper for s in _SUBSTRINGS) or _SECRET_PREFIXES.match(upper):
        return True
    return any(word in _SECRET_WORDS for word in re.split(r"[^A-Z0-9]+", upper))


def checked(extra: Mapping[str, str] | None, *, origin: str) -> dict[str, str]:
    """`extra` as a plain dict, refusing secret-looking names and non-string values."""
    result: dict[str, str] = {}
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ConfigurationError(
                f"{origin}: environment variables must map str to str, got {name!r}: {value!r}"
            )
        if looks_secret(name):
            raise SecretEnvironmentError(
                f"{origin}: {name} looks like a secret and is never passed into the sandbox; "
                "rename it if it is not one, or give the task what it needs another way"
            )
        result[name] = value
    return result


def sandbox_env(
    *,
    workdir: Path,
    tmpdir: Path,
    extra: Mapping[str, str] | None = None,
    parent: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a sandboxed command.

    `extra` is added last and unchecked here: callers pass either `checked(...)` values
    or a task's own literal settings (which hold nothing of the parent's)."""
    source = os.environ if parent is None else parent
    env = {
        "PATH": SAFE_PATH,
        "HOME": str(workdir),
        "TASK_WORKDIR": str(workdir),
        "TMPDIR": str(tmpdir),
        "USER": "agent",
        "LOGNAME": "agent",
        "SHELL": "/bin/bash",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "true",  # no editor to wait for: git keeps the message it prepared
        "DEBIAN_FRONTEND": "noninteractive",
        "PYTHONUNBUFFERED": "1",
    }
    for name in COPIED:
        value = source.get(name)
        if value is not None and not looks_secret(name):
            env[name] = value
    env.update(extra or {})
    return env

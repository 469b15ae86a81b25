"""The flags more than one command takes, each declared once (`SHARED`: the same
names, types, defaults and help wherever it is taken), and the groups of them that
running episodes and reading a run folder take."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_graph.bench.agents import AGENTS
from turnbon_graph.cli.flags.parser import hint
from turnbon_graph.cli.flags.values import (
    DEFAULT_ENV,
    ENVIRONMENT_OPTIONS,
    MODEL_HINT,
    SANDBOXES,
    SELECTOR_KEYWORDS,
    SHELLS,
    model_name,
    positive_float,
    positive_int,
    selector_name,
)


@dataclass(frozen=True)
class Flag:
    """One shared flag: its option strings and `add_argument` keywords."""

    names: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def add(self, parser: argparse.ArgumentParser, **overrides: Any) -> None:
        """Adds it to `parser`; `overrides` may change only the help text, whether it is
        required, and its `dest`. A parser with `argument_default=SUPPRESS` gets no
        default."""
        unknown = set(overrides) - {"help", "required", "dest"}
        if unknown:
            raise ValueError(f"a shared flag's {', '.join(sorted(unknown))} cannot change")
        options = {**self.options, **overrides}
        if parser.argument_default is argparse.SUPPRESS:
            options.pop("default", None)
        parser.add_argument(*self.names, **options)


SELECTOR_METAVAR = "|".join(("MODEL", *SELECTOR_KEYWORDS))

SHARED: dict[str, Flag] = {
    "env": Flag(
        ("--env",),
        {"default": DEFAULT_ENV, "metavar": "NAME", "help": "environment name"},
    ),
    "tasks": Flag(
        ("--tasks",),
        {"metavar": "SPEC", "help": "passed to the environment (which task set, a path, ...)"},
    ),
    "sandbox": Flag(
        ("--sandbox",),
        {
            "choices": SANDBOXES,
            "help": "where every episode runs: bwrap, the host sandbox; container, a "
            "Podman or Docker container of the task's image (default: each task where it "
            "belongs: a task with an environment/Dockerfile or docker_image in a container)",
        },
    ),
    "shell": Flag(
        ("--shell",),
        {
            "choices": SHELLS,
            "help": "how a container episode runs the agent's commands: session, one shell "
            "(tmux) for the whole episode, in which cd, variables, jobs and running "
            "programs carry from turn to turn, as Terminus-2's; fresh, `bash -c` per "
            "command (default: session where the image has tmux)",
        },
    ),
    "force_build": Flag(
        ("--force-build",),
        {
            "action": "store_true",
            "default": None,  # not given: not passed to the environment's factory
            "help": "build each container task's environment/Dockerfile even when it names "
            "a docker_image, and again when its image is kept from an earlier run",
        },
    ),
    "agent": Flag(
        ("--agent",),
        {
            "choices": AGENTS,
            "default": AGENTS[0],
            "help": "who plays: turnbon, the Turn-BoN agent on --model; oracle, the task's "
            "own solution (solution/solve.sh), and nop, nothing at all, to check a task set "
            "as Harbor does (no model, no tokens): a sound task passes the oracle and fails "
            "nop",
        },
    ),
    "model": Flag(
        ("--model",),
        {
            "type": model_name,
            "metavar": "MODEL",
            "help": "a LiteLLM model id, or 'stub': the environment's own scripted stub "
            "policy on a loopback server (no API key, no network)",
        },
    ),
    "n": Flag(
        ("-n", "--n"),
        {"type": positive_int, "default": 4, "metavar": "N", "help": "candidates per turn"},
    ),
    "selector": Flag(
        ("--selector",),
        {
            "type": selector_name,
            "metavar": SELECTOR_METAVAR,
            "help": "a LiteLLM model id for an LLM selector, or a selector that calls no "
            "model (default: an LLM selector on --model)",
        },
    ),
    "selector_api_base": Flag(
        ("--selector-api-base",),
        {
            "metavar": "URL",
            "help": "api_base for a --selector model id (the default selector shares --api-base)",
        },
    ),
    "api_base": Flag(
        ("--api-base",), {"metavar": "URL", "help": "api_base for the generator's calls"}
    ),
    "temperature": Flag(
        ("--temperature",),
        {
            "type": float,
            "metavar": "T",
            "help": "the generator's sampling temperature (default: the model's, 0.9 on "
            "the embedded model)",
        },
    ),
    "tool_calling": Flag(
        ("--tool-calling",),
        {
            "choices": ("auto", "native", "prompted"),
            "help": "native tool calls, tools in the prompt with a JSON answer, or auto "
            "(default: auto; prompted on the embedded model)",
        },
    ),
    "timeout": Flag(
        ("--timeout",), {"type": float, "metavar": "S", "help": "per model call, in seconds"}
    ),
    "seed": Flag(
        ("--seed",),
        {
            "type": int,
            "default": 0,
            "metavar": "S",
            "help": "seeds the selector's shuffle of the candidates, the random selector "
            "and the stub policy (--model stub): the same seed, the same stub run",
        },
    ),
    "trials": Flag(
        ("--trials",),
        {"type": positive_int, "default": 1, "metavar": "K", "help": "episodes per task"},
    ),
    "concurrency": Flag(
        ("--concurrency",),
        {"type": positive_int, "default": 4, "metavar": "C", "help": "how many run at once"},
    ),
    "run": Flag(
        ("--run",),
        {
            "type": Path,
            "metavar": "DIR",
            "help": "run folder; the same command with it resumes (default: "
            "runs/<env>-<model>-<time>)",
        },
    ),
    "baseline": Flag(
        ("--baseline",),
        {"default": "N=1", "metavar": "SETTING", "help": "the setting compared against"},
    ),
    "resamples": Flag(
        ("--resamples",),
        {"type": positive_int, "default": 10_000, "metavar": "K", "help": "bootstrap resamples"},
    ),
    "out": Flag(("--out",), {"type": Path, "metavar": "DIR", "help": "where the files go"}),
    "ray": Flag(
        ("--ray",),
        {
            "nargs": "?",
            "const": "local",
            "default": None,
            "metavar": "ADDRESS",
            "help": "run on Ray (the `ray` extra): alone, a local Ray instance on every core "
            "of this machine; 'auto' or host:port joins that cluster (docs/ray.md) "
            "(default: this process only)",
        },
    ),
    "cluster_max_concurrency": Flag(
        ("--cluster-max-concurrency",),
        {
            "type": positive_int,
            "metavar": "N",
            "help": "with --ray: model calls in flight across all workers together (one "
            "actor hands out the slots; default: only each worker's own cap)",
        },
    ),
    "cluster_rate_limit": Flag(
        ("--cluster-rate-limit",),
        {
            "type": positive_float,
            "metavar": "R",
            "help": "with --ray: model calls a second across all workers together, e.g. a "
            "provider's rate limit (default: only each worker's own)",
        },
    ),
}
"""Every flag more than one command takes, by its `dest`."""

N_SETTINGS = Flag(
    SHARED["n"].names,
    {
        "type": positive_int,
        "nargs": "+",
        "default": [1, 4],
        "metavar": "N",
        "help": "candidates per turn, one setting each; N=1 is the baseline",
    },
)
"""`-n/--n` of the commands that compare settings (`bench`): several N, one run each."""


def add_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The shared flags `names`, as defined in `SHARED`."""
    for name in names:
        SHARED[name].add(parser)


def environment_options(settings: Any) -> dict[str, Any]:
    """The environment flags given (`ENVIRONMENT_OPTIONS`), for its factory; `settings`
    is parsed flags or a dict of settings."""
    values = settings if isinstance(settings, dict) else vars(settings)
    return {k: values[k] for k in ENVIRONMENT_OPTIONS if values.get(k) is not None}


def episode_arguments(
    parser: argparse.ArgumentParser, *, selector: str, agents: bool = False
) -> None:
    """Which environment, tasks, model and selector: what running episodes takes; with
    `agents`, also `--agent` (then `--model` is asked for by the command, not argparse:
    a reference agent takes none)."""
    add_flags(parser, "env", "tasks", "sandbox", "shell", "force_build")
    if agents:
        add_flags(parser, "agent")
    parser.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="run only these task ids (default: all)",
    )
    SHARED["model"].add(parser, required=not agents)
    hint(parser, "--model", MODEL_HINT)
    SHARED["selector"].add(
        parser,
        help=f"{selector}: a LiteLLM model id, or a selector that calls no model "
        "(default: an LLM selector on --model)",
    )
    add_flags(parser, "selector_api_base", "api_base", "temperature", "tool_calling", "timeout")


def run_folder_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """RUN, --out, --baseline and --resamples: what reading a run folder's results takes."""
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    SHARED["out"].add(parser, help=f"where the files go (default: {out})")
    add_flags(parser, "baseline", "resamples")

"""The argument groups the commands share (environment, tasks, model, selector,
endpoints; a run folder's results), their checks, run folder names and resume hints."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

STUB_MODEL = "stub"
"""--model stub: the environment's own scripted stub policy on a loopback server."""
INTERRUPTED = 130
"""The shell's code for a run stopped by Ctrl-C."""


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def episode_arguments(parser: argparse.ArgumentParser, *, selector: str) -> None:
    """Which environment, tasks, model and selector: what running episodes takes."""
    parser.add_argument("--env", required=True, metavar="NAME", help="environment name")
    parser.add_argument(
        "--tasks", metavar="SPEC", help="passed to the environment (which task set, a path, ...)"
    )
    parser.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="run only these task ids (default: all)",
    )
    parser.add_argument(
        "--model",
        required=True,
        help=(
            "a LiteLLM model id, or 'stub': the environment's own scripted stub policy on a "
            "loopback server (no API key, no network)"
        ),
    )
    parser.add_argument(
        "--selector",
        metavar="MODEL|first|random|majority",
        help=f"{selector}: a LiteLLM model id, or a selector that calls no model "
        "(default: an LLM selector on --model)",
    )
    parser.add_argument(
        "--selector-api-base",
        metavar="URL",
        help="api_base for a --selector model id (the default selector shares --api-base)",
    )
    parser.add_argument("--api-base", metavar="URL", help="api_base for the generator's calls")
    parser.add_argument("--timeout", type=float, metavar="S", help="per model call, in seconds")


def run_folder_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """RUN, --out, --baseline and --resamples: what reading a run folder's results takes."""
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    parser.add_argument("--out", type=Path, metavar="DIR", help=f"default: {out}")
    parser.add_argument(
        "--baseline", default="N=1", metavar="SETTING", help="compare against it (default N=1)"
    )
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=10_000,
        metavar="K",
        help="bootstrap resamples (default 10000)",
    )


def default_run_dir(env: str, model: str, now: datetime | None = None) -> Path:
    """runs/<env>-<model, as a file name>-<time>."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-") or "model"
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{env}-{slug}-{stamp}"


def resume_command(argv: Sequence[str], run_dir: Path) -> str:
    """The same command with `--run run_dir` (replacing any --run it had)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--run":
            skip = True
        elif not arg.startswith("--run="):
            kept.append(arg)
    return shlex.join(["turnbon", *kept, "--run", str(run_dir)])

"""A run folder's default name, and the command that resumes a run into it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path


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

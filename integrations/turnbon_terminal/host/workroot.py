"""Where episodes live: a root-owned directory nobody else can write to.

    <work_root>/              0711, ours: others may pass through, not list or write
      uids/                   0700: one lock file per leased uid
      episodes/<name>-XXXX/   0711, ours: an episode's directory
        work/                 0700, the episode's uid: the working directory and HOME
        tmp/                  0700, the episode's uid: TMPDIR
        tests/                0700, the episode's uid: the verifier's copy of tests/

The episode directory is ours, so the agent cannot plant anything (a `tests` symlink)
next to its workdir; another episode's uid cannot enter `work/` or `tmp/`.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turnbon_terminal.errors import SandboxError


def default_work_root() -> Path:
    """Where episodes' folders go by default: a folder of this user's under the temporary
    directory."""
    return Path(tempfile.gettempdir()) / f"turnbon-terminal-{os.geteuid()}"


def private_dir(path: Path, mode: int) -> Path:
    """`path` as a directory of ours that no one else can write to, created if missing."""
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SandboxError(f"cannot create the sandbox directory {path}: {exc}") from exc
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise SandboxError(
            f"{path} exists but is not a directory owned by uid {os.geteuid()} (a symlink, "
            "or made by someone else): remove it, or pass another work_root"
        )
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)
    return path


def reachable_by_others(path: Path) -> None:
    """Raises SandboxError unless every existing folder above `path` lets other users
    pass (an episode's uid opens its work/ from there)."""
    for parent in path.absolute().parents:
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            continue
        if not mode & stat.S_IXOTH:
            raise SandboxError(
                f"the work root {path} is inside {parent} (mode {stat.S_IMODE(mode):o}), "
                "which the episode's own uid cannot pass through: choose a work_root "
                "whose parent folders are world-executable (the default, under /tmp, is)"
            )


def remove_tree(path: Path) -> None:
    """Removes `path` even where the agent took away permissions (as a non-root user)."""

    def retry(function: Callable[..., Any], failed: str, _: Any) -> None:
        parent = os.path.dirname(failed)
        try:
            os.chmod(parent, 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                function(failed)
        except OSError:
            pass

    if path.exists():
        shutil.rmtree(path, onerror=retry)

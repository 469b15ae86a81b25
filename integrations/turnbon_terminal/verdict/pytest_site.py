"""A copy of pytest and its dependencies that any sandbox user can read.

The runner's pytest may live where the sandbox cannot go (a venv under /root) and next
to packages it must not see (this one, with every task's tests and solutions). So the
files of pytest's distribution and of those it requires (all pure Python) are copied,
once per version set, into `<work_root>/pytest-<key>/`, world-readable and ours, which
the verifier's sandbox binds read-only and puts on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import shutil
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

from turnbon_graph._extras import install_hint
from turnbon_terminal.errors import TerminalError
from turnbon_terminal.host.workroot import private_dir, remove_tree


class PytestMissingError(TerminalError, ImportError):
    """pytest is not installed for this interpreter (it comes with the `terminal` extra)."""


def _distributions(name: str = "pytest") -> list[metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        wanted = todo.pop()
        key = wanted.lower().replace("_", "-")
        if key in found:
            continue
        try:
            dist = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            if wanted == name:
                raise PytestMissingError(
                    "the terminal environment's verifier runs each task's tests with "
                    f"pytest, which is not installed for this Python ({sys.executable}): "
                    f"install the terminal extra: {install_hint('terminal')}"
                ) from None
            continue  # an optional dependency of another platform
        found[key] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return sorted(found.values(), key=lambda d: d.metadata["Name"].lower())


def pytest_site(work_root: Path) -> Path:
    """The folder holding the copy (made if missing); blocking."""
    dists = _distributions()
    key = hashlib.sha256(
        "\n".join(f"{d.metadata['Name']}=={d.version}" for d in dists).encode()
    ).hexdigest()[:16]
    private_dir(work_root, 0o711)
    target = work_root / f"pytest-{key}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix="pytest-staging-", dir=work_root))
    try:
        for dist in dists:
            base = Path(str(dist.locate_file(""))).resolve()
            for entry in dist.files or []:
                source = Path(str(dist.locate_file(entry))).resolve()
                if base not in source.parents or not source.is_file():
                    continue  # a script in ../../bin, or a file missing
                copy = staging / source.relative_to(base)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, copy)
        publish(staging, target)
    finally:
        remove_tree(staging)
    return target


def publish(staging: Path, target: Path) -> None:
    """`staging`, made readable by everyone, renamed to `target`; when another run made
    `target` meanwhile, theirs is kept (removing `staging` is the caller's)."""
    _open_up(staging)
    try:
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():
            raise


def readable_copy(source: Path, target: Path) -> None:
    """`source` copied to `target`, readable (not writable) by everyone (symlinks kept)."""
    shutil.copytree(source, target, symlinks=True)
    _open_up(target)


def _open_up(root: Path) -> None:
    """Directories 755 and files 644 (755 if executable), ours."""
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                mode = 0o755 if os.stat(path).st_mode & 0o100 else 0o644
                os.chmod(path, mode)

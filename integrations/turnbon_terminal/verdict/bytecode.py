"""The verifier's bytecode cache: the `pycache_prefix` its interpreter, and every Python
the tests start, reads instead of `__pycache__` folders (so the work folder's are never
read, whatever they hold).

One folder of ours per interpreter and pytest copy, `<work_root>/pycache-<key>/`, filled
once on the host by a small pytest session run with that prefix (the interpreter's
library and pytest, compiled as they are imported), then world-readable and read-only
in the sandbox: nothing of an episode is ever written to it, and the work folder's paths
(new for every episode) have no entry in it. A Python the tests start that is not this
interpreter finds nothing there and compiles what it imports (a little slower).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
from pathlib import Path

from turnbon_terminal.host.workroot import private_dir, remove_tree
from turnbon_terminal.task.envvars import SAFE_PATH
from turnbon_terminal.verdict.pytest_site import publish

_log = logging.getLogger(__name__)
WARM_TIMEOUT_S = 120.0
WARM = (
    "import sys; sys.path.insert(0, sys.argv[1]); import pytest; "
    "raise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider', "
    "'--junitxml=' + sys.argv[2] + '/report.xml', sys.argv[2]]))"
)
"""A session like the verifier's, on one test of ours: it imports what a run imports."""


def bytecode_cache(work_root: Path, python: str, site: Path) -> Path:
    """The cache folder of `python` and the pytest copy `site`, made if missing
    (blocking: about a second, once). A warm-up that fails leaves it partly empty:
    slower verifications, never wrong ones."""
    key = hashlib.sha256(f"{os.path.realpath(python)}\n{site.name}".encode()).hexdigest()[:16]
    private_dir(work_root, 0o711)
    target = work_root / f"pycache-{key}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix="pycache-staging-", dir=work_root))
    scratch = Path(tempfile.mkdtemp(prefix="pycache-session-", dir=work_root))
    try:
        (scratch / "test_warm.py").write_text("def test_warm():\n    assert True\n")
        _warm(python, site, staging, scratch)
        remove_tree(staging.joinpath(*scratch.parts[1:]))  # the test's own bytecode
        publish(staging, target)
    finally:
        remove_tree(staging)
        remove_tree(scratch)
    return target


def _warm(python: str, site: Path, prefix: Path, scratch: Path) -> None:
    argv = [python, "-I", "-X", f"pycache_prefix={prefix}", "-c", WARM, str(site), str(scratch)]
    try:
        done = subprocess.run(
            argv,
            cwd=scratch,
            env={"PATH": SAFE_PATH},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=WARM_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _log.warning("turnbon_terminal: the verifier's bytecode cache was not filled: %s", exc)
        return
    if done.returncode != 0:
        said = done.stdout.decode(errors="replace").strip()[-300:]
        _log.warning("turnbon_terminal: the verifier's bytecode cache was not filled: %s", said)

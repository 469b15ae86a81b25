"""Verifier of the backup-script task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])
SCRIPT = WORKDIR / "backup.sh"


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), "backup.sh was not created"
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=30)


def test_backup(tmp_path: Path) -> None:
    source = tmp_path / "my docs"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("alpha\n")
    (source / "sub" / "b.txt").write_text("bravo\n")
    result = run(tmp_path, "my docs", "out/backups")
    assert result.returncode == 0, result.stderr
    archive = tmp_path / "out" / "backups" / "my docs.tar.gz"
    assert archive.is_file()
    assert (tmp_path / result.stdout.strip()).resolve() == archive.resolve()
    with tarfile.open(archive, "r:gz") as tar:
        names = {m.name.rstrip("/") for m in tar.getmembers()}
        assert all(n == "my docs" or n.startswith("my docs/") for n in names), names
        files = {m.name: m for m in tar.getmembers() if m.isfile()}
        assert set(files) == {"my docs/a.txt", "my docs/sub/b.txt"}
        member = tar.extractfile(files["my docs/sub/b.txt"])
        assert member is not None and member.read() == b"bravo\n"


def test_wrong_arguments(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for args in [("src",), ("src", "dest", "extra"), ("nowhere", "dest")]:
        result = run(tmp_path, *args)
        assert result.returncode == 1, args
        assert result.stderr.strip(), args
        assert not (tmp_path / "dest").exists(), args

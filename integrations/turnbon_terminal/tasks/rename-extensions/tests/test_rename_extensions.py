"""Verifier of the rename-extensions task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])
EXPECTED = {
    "photos/a.jpg": "image a\n",
    "photos/b.jpg": "image b\n",
    "photos/c.jpg": "image c\n",
    "photos/weird name.jpg": "image with a space\n",
    "photos/2021/beach.jpg": "beach\n",
    "photos/2021/notes.txt": "not an image\n",
    "photos/2022/x.png": "png\n",
    "photos/2022/deep/y.jpg": "deep y\n",
    "photos/2022/deep/jpeg.txt": "a text file named jpeg\n",
}


def test_files_are_renamed_and_contents_kept() -> None:
    found = {
        str(p.relative_to(WORKDIR)): p.read_text()
        for p in (WORKDIR / "photos").rglob("*")
        if p.is_file()
    }
    assert found == EXPECTED

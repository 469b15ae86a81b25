"""The run folder's JSON-lines files survive a writer killed mid-line."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from turnbon_graph.bench.running.runs import (
    EpisodeResult,
    Worker,
    append_line,
    current_worker,
    read_lines,
)


def result(task: str) -> EpisodeResult:
    return EpisodeResult(
        task=task, trial=0, setting="N=4", n=4, outcome="pass", turns=1, duration_s=1.0
    )


def test_a_line_appended_after_a_torn_one_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "run" / "episodes.jsonl"
    append_line(path, result("a").model_dump_json())
    with path.open("a", encoding="utf-8") as handle:  # a kill mid-write
        handle.write(result("b").model_dump_json()[:40])
    append_line(path, result("c").model_dump_json())
    assert [r.task for r in read_lines(path, EpisodeResult)] == ["a", "c"]


def test_rows_written_before_the_worker_field_still_read(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    old = result("a").model_dump(exclude={"worker"})
    append_line(path, json.dumps(old))
    append_line(path, result("b").model_copy(update={"worker": current_worker()}).model_dump_json())
    a, b = read_lines(path, EpisodeResult)
    assert a.worker is None and b.worker == Worker(pid=os.getpid(), host=socket.gethostname())


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_lines(tmp_path / "none.jsonl", EpisodeResult) == []

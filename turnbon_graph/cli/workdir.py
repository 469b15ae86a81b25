"""Where `turnbon run` episodes ran: an environment wrapper that notes each episode's
working directory and, with --keep-workdir, copies it out before the episode is closed
(closing removes it), so the agent's files can be inspected afterwards. The copy keeps
what the files are and leaves out named pipes, sockets and devices, with a note
(`turnbon_graph.bench.copying`); an odd file never costs the episode its verdict."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from turnbon_graph.bench.environment import Environment, Episode, TaskSpec, Verdict


class KeptEpisode:
    """An episode that, when closed, copies its working directory to `keep_in` first."""

    def __init__(self, episode: Episode, workdir: Path | None, keep_in: Path | None) -> None:
        self.episode = episode
        self.workdir = workdir
        self.keep_in = keep_in
        self.kept: Path | None = None
        self.left_out: list[str] = []
        """What the kept copy lacks, one note each ("skipped named pipe work/p")."""

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self.episode.tools

    def __getattr__(self, name: str) -> object:  # run, fork, sandbox, ...: the episode's
        if name == "episode":  # not set yet (an object being copied): no endless lookup
            raise AttributeError(name)
        return getattr(self.episode, name)

    async def verify(self) -> Verdict:
        return await self.episode.verify()

    async def close(self) -> None:
        try:
            if self.keep_in is not None and self.workdir is not None:
                self.kept, self.left_out = await asyncio.to_thread(
                    _keep, self.workdir, self.keep_in
                )
        finally:
            await self.episode.close()


class WorkdirNotes:
    """Wraps an environment: `start` notes each episode's working directory (and keeps
    a copy of it with `keep`); `note()` says where the last episode ran."""

    def __init__(self, environment: Environment, *, keep: bool) -> None:
        self.environment = environment
        self.keep = keep
        self.last: KeptEpisode | None = None

    @property
    def name(self) -> str:
        return self.environment.name

    def tasks(self) -> Sequence[TaskSpec]:
        return self.environment.tasks()

    def __getattr__(self, name: str) -> object:  # stub_policy, add_instruction, ...
        return getattr(self.environment, name)

    async def start(self, task: TaskSpec, trial: int) -> KeptEpisode:
        episode = await self.environment.start(task, trial)
        workdir = getattr(episode, "workdir", None)
        keep_in = None
        if self.keep:
            folder = Path(tempfile.mkdtemp(prefix=f"turnbon-run-{task.id}-{trial + 1}-"))
            keep_in = folder / "work"
        self.last = KeptEpisode(episode, Path(workdir) if workdir else None, keep_in)
        return self.last

    def note(self) -> str | None:
        """Where the last episode ran and what became of its working directory."""
        last = self.last
        if last is None or last.workdir is None:
            return None
        if last.kept is not None:
            kept = f"Working copy kept: {last.kept} (the episode ran in {last.workdir})"
            return kept + _left_out(last.left_out)
        if last.left_out:
            return (
                f"No working copy kept{_left_out(last.left_out)}; the episode ran in "
                f"{last.workdir}, removed when it ended"
            )
        return (
            f"The episode ran in {last.workdir}, removed when it ended "
            "(--keep-workdir keeps a copy)"
        )


def _keep(workdir: Path, keep_in: Path) -> tuple[Path | None, list[str]]:
    """Copies `workdir` to `keep_in`: (the copy, or None, and what it lacks)."""
    from turnbon_graph.bench.copying import copy_tree

    if not workdir.is_dir():
        return None, []
    try:
        notes = copy_tree(workdir, keep_in).notes
    except OSError as exc:  # a full disk: what was copied stays, the note says so
        notes = [f"the rest, as copying failed ({exc})"]
    return (keep_in if keep_in.is_dir() else None), notes


def _left_out(notes: list[str], shown: int = 5) -> str:
    """The first `shown` notes as a clause ("; left out: ..."), or "" for none."""
    if not notes:
        return ""
    more = f" and {len(notes) - shown} more" if len(notes) > shown else ""
    return f"; left out: {'; '.join(notes[:shown])}{more}"

"""Where `turnbon run` episodes ran: an environment wrapper that notes each episode's
working directory and, with --keep-workdir, copies it out before the episode is closed
(closing removes it), so the agent's files can be inspected afterwards. The copy keeps
what the files are and leaves out named pipes, sockets and devices, with a note
(`turnbon_graph.bench.copying`); an odd file never costs the episode its verdict.

An episode shows its working directory as `workdir` (a folder on this machine), or, when
it lives elsewhere (a container), as `location` (words) with an `export_workdir(target)`
coroutine that copies it to `target` and returns what the copy lacks."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

Copier = Callable[[Path], Awaitable[list[str]]]
"""Copies an episode's working directory to a new folder; returns what the copy lacks."""

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from turnbon_graph.bench.environment import Environment, Episode, TaskSpec, Verdict


class KeptEpisode:
    """An episode that, when closed, copies its working directory to `keep_in` first
    (with `copy`, when it has one)."""

    def __init__(
        self,
        episode: Episode,
        location: str | None,
        keep_in: Path | None,
        copy: Copier | None = None,
    ) -> None:
        self.episode = episode
        self.location = location
        """Where its working directory is, in words (a folder, or one in a container)."""
        self.copy = copy
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
            if self.keep_in is not None and self.copy is not None:
                try:
                    self.left_out = await self.copy(self.keep_in)
                except Exception as exc:  # a full disk, a failed copy: noted, not fatal
                    self.left_out = [f"the rest, as copying failed ({exc})"]
                self.kept = self.keep_in if self.keep_in.is_dir() else None
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
        copy: Copier | None = getattr(episode, "export_workdir", None)
        location: str | None = getattr(episode, "location", None)
        if workdir is not None:
            location = str(workdir)
            copy = _copier(Path(workdir))
        keep_in = None
        if self.keep and copy is not None:
            folder = Path(tempfile.mkdtemp(prefix=f"turnbon-run-{task.id}-{trial + 1}-"))
            keep_in = folder / "work"
        self.last = KeptEpisode(episode, location, keep_in, copy)
        return self.last

    def note(self) -> str | None:
        """Where the last episode ran and what became of its working directory."""
        last = self.last
        if last is None or last.location is None:
            return None
        if last.kept is not None:
            kept = f"Working copy kept: {last.kept} (the episode ran in {last.location})"
            return kept + _left_out(last.left_out)
        if last.left_out:
            return (
                f"No working copy kept{_left_out(last.left_out)}; the episode ran in "
                f"{last.location}, removed when it ended"
            )
        keeps = " (--keep-workdir keeps a copy)" if last.copy is not None else ""
        return f"The episode ran in {last.location}, removed when it ended{keeps}"


def _copier(workdir: Path) -> Copier:
    """Copies the folder `workdir` of this machine (see `_keep`)."""

    async def copy(target: Path) -> list[str]:
        return await asyncio.to_thread(_keep, workdir, target)

    return copy


def _keep(workdir: Path, keep_in: Path) -> list[str]:
    """Copies `workdir` to `keep_in`; returns what the copy lacks."""
    from turnbon_graph.bench.copying import copy_tree

    if not workdir.is_dir():
        return []
    try:
        return copy_tree(workdir, keep_in).notes
    except OSError as exc:  # a full disk: what was copied stays, the note says so
        return [f"the rest, as copying failed ({exc})"]


def _left_out(notes: list[str], shown: int = 5) -> str:
    """The first `shown` notes as a clause ("; left out: ..."), or "" for none."""
    if not notes:
        return ""
    more = f" and {len(notes) - shown} more" if len(notes) > shown else ""
    return f"; left out: {'; '.join(notes[:shown])}{more}"

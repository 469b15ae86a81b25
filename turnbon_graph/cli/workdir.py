"""Where `turnbon run` episodes ran: an environment wrapper that notes each episode's
working directory and, with --keep-workdir, copies it out before the episode is closed
(closing removes it), so the agent's files can be inspected afterwards."""

from __future__ import annotations

import shutil
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

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self.episode.tools

    async def verify(self) -> Verdict:
        return await self.episode.verify()

    async def close(self) -> None:
        try:
            if self.keep_in is not None and self.workdir is not None and self.workdir.is_dir():
                shutil.copytree(self.workdir, self.keep_in, symlinks=True)
                self.kept = self.keep_in
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
            return f"Working copy kept: {last.kept} (the episode ran in {last.workdir})"
        return (
            f"The episode ran in {last.workdir}, removed when it ended "
            "(--keep-workdir keeps a copy)"
        )

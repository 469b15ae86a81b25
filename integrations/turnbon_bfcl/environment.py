"""BFCL v4 multi-turn as a turnbon `Environment`."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from turnbon_bfcl import bfcl_api
from turnbon_bfcl.bfcl_api import Entry
from turnbon_bfcl.episode import BFCLEpisode
from turnbon_bfcl.replay import Call, GroundTruthReplay, ReplayScript
from turnbon_bfcl.schema import parse_call
from turnbon_bfcl.tasks import task_spec, user_turns
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.errors import ConfigurationError

SUPPORTED_CATEGORIES = ("multi_turn_base",)


class BFCLEnvironment:
    """BFCL's multi-turn entries (ids in BFCL's order), each episode on fresh backends.

    Args:
        category: the BFCL test category; only `multi_turn_base` is supported.
        ids: entry ids to keep (`multi_turn_base_0`, ...), in BFCL's order; None for all.
        limit: keep at most this many (after `ids`).

    Raises:
        ConfigurationError: the category is not supported, `limit` is below 1, or an id
            is unknown.
    """

    name = "bfcl"

    def __init__(
        self,
        category: str = "multi_turn_base",
        ids: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> None:
        if category not in SUPPORTED_CATEGORIES:
            raise ConfigurationError(
                f"BFCL category {category!r} is not supported; use multi_turn_base (the "
                "missed-function, missed-parameter and long-context variants are not wired)"
            )
        if limit is not None and limit < 1:
            raise ConfigurationError(f"limit must be a whole number >= 1, got {limit!r}")
        self.category = category
        entries = bfcl_api.load_entries(category)
        ground_truth = bfcl_api.load_ground_truth(category)
        if ids is not None:
            known = {str(e["id"]) for e in entries}
            if missing := [i for i in ids if i not in known]:
                raise ConfigurationError(
                    f"unknown BFCL id(s) {', '.join(missing)}; ids look like "
                    f"{category}_0 ... {category}_{len(entries) - 1}"
                )
            wanted = set(ids)
            entries = [e for e in entries if e["id"] in wanted]
        if limit is not None:
            entries = entries[:limit]
        self._entries: dict[str, Entry] = {str(e["id"]): e for e in entries}
        self._ground_truth = {i: ground_truth[i] for i in self._entries}
        steps = bfcl_api.max_steps_per_turn()
        self._tasks = [task_spec(e, category, steps) for e in entries]

    def tasks(self) -> Sequence[TaskSpec]:
        """The kept entries as tasks: the first user turn the instruction, the others
        follow-ups.

        Returns:
            The tasks, in BFCL's order.
        """
        return list(self._tasks)

    def ground_truth(self, task_id: str) -> list[list[str]]:
        """BFCL's ground-truth calls for a task, per user turn.

        Args:
            task_id: one of the kept entries' ids.

        Returns:
            The calls, as BFCL writes them (`cd(folder='documents')`), per user turn (a
                copy).

        Raises:
            ConfigurationError: the id is not one of this environment's tasks.
        """
        return copy.deepcopy(self._ground_truth[self._known(task_id)])

    async def start(self, task: TaskSpec, trial: int) -> BFCLEpisode:
        """An episode of `task` on fresh backends.

        Args:
            task: one of `tasks()`.
            trial: which attempt at the task this is.

        Returns:
            The episode, its backends in the entry's initial state.

        Raises:
            ConfigurationError: the task is not one of this environment's.
        """
        # A deep copy per episode: nothing an episode or BFCL does can reach another.
        entry = copy.deepcopy(self._entries[self._known(task.id)])
        return BFCLEpisode(entry, self.ground_truth(task.id), self.category)

    def stub_policy(
        self,
        *,
        calls_per_step: int | None = None,
        ground_truth: Mapping[str, list[list[str]]] | None = None,
    ) -> GroundTruthReplay:
        """A `StubServer` responder that replays the ground truth of these tasks (or the
        calls given per task id in `ground_truth`), for `turnbon bench --model stub`.

        Args:
            calls_per_step: calls per model reply; None: a user turn's calls in one reply.
            ground_truth: calls to replay instead, per task id, per user turn.

        Returns:
            The responder.

        Raises:
            ConfigurationError: `calls_per_step` is below 1.
        """
        scripts: dict[str, ReplayScript] = {}
        for task_id, entry in self._entries.items():
            turns = (ground_truth or {}).get(task_id, self._ground_truth[task_id])
            calls = [[self._parse(entry, text) for text in turn_calls] for turn_calls in turns]
            scripts[task_id] = ReplayScript(turns=user_turns(entry), calls=calls)
        return GroundTruthReplay(scripts, calls_per_step=calls_per_step)

    def _parse(self, entry: Entry, text: str) -> Call:
        name = text.split("(", 1)[0].strip()
        return parse_call(text, bfcl_api.parameter_names(entry, name))

    def _known(self, task_id: str) -> str:
        if task_id not in self._entries:
            raise ConfigurationError(
                f"task {task_id!r} is not in this BFCL environment; pick one of its tasks()"
            )
        return task_id


def environment(spec: str | None = None) -> BFCLEnvironment:
    """The `bfcl` entry point of `turnbon.environments`, for `turnbon bench --env bfcl`.

    `spec` (what `--tasks` gives): empty or None for all 200 multi_turn_base entries; a
    whole number N for the first N; or comma-separated entry ids such as
    `multi_turn_base_0,multi_turn_base_17`.
    """
    text = (spec or "").strip()
    if not text:
        return BFCLEnvironment()
    if text.isdigit():
        return BFCLEnvironment(limit=int(text))
    ids = [part.strip() for part in text.split(",") if part.strip()]
    return BFCLEnvironment(ids=ids)

"""The report of a reference agent's run (`turnbon bench --agent oracle|nop`): which
tasks do not end as a sound task does, with how they ended and the end of the
verifier's output (a test.sh whose own set-up failed shows here, not only a wrong
answer)."""

from __future__ import annotations

from collections.abc import Sequence

from turnbon_graph.bench.agents import sound_ending, unsound_tasks
from turnbon_graph.bench.running.runs import EpisodeResult

TAIL_LINES = 12
"""The lines of the verifier's output shown for a task that did not end as expected."""


def ending(rows: Sequence[EpisodeResult], results: Sequence[EpisodeResult]) -> str:
    """How a task's unexpected episodes ended: how many of its episodes, the first's
    outcome and error."""
    first = rows[0]
    of = sum(r.task == first.task for r in results)
    how = first.outcome.replace("_", " ") + (f": {first.error}" if first.error else "")
    return f"{len(rows)} of {of} episodes, {how}"


def verifier_tail(row: EpisodeResult) -> list[str]:
    """The last lines the verifier printed in an episode."""
    return (row.verifier_output or "").strip().splitlines()[-TAIL_LINES:]


def task_check_section(results: Sequence[EpisodeResult], agent: str) -> list[str]:
    """The report's section on the task set: the tasks that do not end as they should
    under `agent`, each with the end of its verifier's output."""
    expected = sound_ending(agent)
    wrong = unsound_tasks(results, agent)
    count = len({r.task for r in results})
    lines = ["## Task check", ""]
    lines.append(
        f"A sound task {expected} under `{agent}` "
        + (
            "(its own solution, `solution/solve.sh`, run as Harbor's oracle runs it)."
            if agent == "oracle"
            else "(nothing done)."
        )
    )
    lines.append("")
    if not wrong:
        lines += [f"Every task of {count} {expected}, as it should.", ""]
        return lines
    lines += [f"**{len(wrong)} of {count} tasks do not:**", ""]
    for task, rows in wrong.items():
        lines += [f"- `{task}`: {ending(rows, results)}", ""]
        if tail := verifier_tail(rows[0]):
            lines += ["  ```text", *(f"  {line}" for line in tail), "  ```", ""]
    return lines

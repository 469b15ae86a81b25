"""A two-turn shell task for the Turn-BoN Inspect agent's tests: write a file with the
shell, then submit. Its scorer reads the file back from the sandbox."""

from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

from turnbon_inspect import turn_bon

FILE = "out/hello.txt"


@scorer(metrics=[accuracy()])
def file_written():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        try:
            text = await sandbox().read_file(FILE)
        except FileNotFoundError:
            return Score(value=INCORRECT, explanation=f"{FILE} is missing")
        return Score(value=CORRECT if text.strip() == target.text else INCORRECT, answer=text)

    return score


def _sample() -> Sample:
    return Sample(
        id="hello",
        input=f"Write 'hi' into {FILE} (make its folder first), then submit 'done'.",
        target="hi",
    )


@task
def two_turns(sandbox_kind: str = "local") -> Task:
    """The task with the eval's tools set up front, for `--solver turnbon_inspect/...`."""
    return Task(
        dataset=[_sample()],
        setup=use_tools(bash(timeout=30)),
        scorer=file_written(),
        sandbox=sandbox_kind,
    )


@task
def two_turns_react(n: int = 3, sandbox_kind: str = "local") -> Task:
    """The task with Turn-BoN as the model of Inspect's own react() agent."""
    return Task(
        dataset=[_sample()],
        solver=react(model=turn_bon(n=n), tools=[bash(timeout=30)]),
        scorer=file_written(),
        sandbox=sandbox_kind,
    )

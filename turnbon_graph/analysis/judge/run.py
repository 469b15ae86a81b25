"""Judging a run folder: one request per (trajectory, rubric), each verdict appended to
`RUN/judge.jsonl` as it arrives, a rerun asking only what is missing.

The questions go through `selectors.model_call.ModelCaller`, the selectors' own loop:
an unusable answer is asked again with the problem stated; if it stays unusable, or the
call fails after the client's retries, the verdict is "unknown" with the error, never a
guess.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.analysis.judge.prompt import (
    MAX_ACTION_CHARS,
    MAX_OUTPUT_CHARS,
    RETRY_PROMPT,
    judge_request,
    parse_verdict,
    render_trajectory,
    verdict_schema,
)
from turnbon_graph.analysis.judge.rubrics import Rubric, check_unique, load_rubrics
from turnbon_graph.analysis.trajectories import Trajectory, load_trajectories
from turnbon_graph.bench.running.runs import append_line, read_lines
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.model_call import ModelCaller, gather_all

__all__ = ["VERDICTS_FILE", "Answer", "JudgeVerdict", "judge_run", "read_verdicts"]

VERDICTS_FILE = "judge.jsonl"
"""Where `judge_run` writes verdicts inside a run folder, one JSON line each."""

Answer = Literal["yes", "no", "unknown"]


class JudgeVerdict(BaseModel):
    """The judge's verdict on one rubric for one attempt."""

    setting: str
    """The attempt's setting."""
    task: str
    """The attempt's task."""
    trial: int
    """The attempt's trial."""
    rubric: str
    """The rubric's id."""
    answer: Answer
    """yes or no as the judge answered; unknown: no valid answer after the retries, or the
    call failed (see `error`)."""
    evidence: str = ""
    """What the agent did, citing turns as "turn N"."""
    turns: list[int] = Field(default_factory=list)
    """The turn numbers the evidence cites."""
    attempts: int = 0
    """Questions asked (the first and each re-ask after an invalid answer)."""
    error: str | None = None
    """Why the answer is unknown (the call failed, or no valid answer came)."""
    usage: Usage = Field(default_factory=Usage)
    """What the judge's calls cost."""
    model: str = ""
    """The judge's model."""
    raw_answer: str | None = None
    """The last answer text when it could not be used (answer "unknown")."""

    @property
    def key(self) -> tuple[str, str, int, str]:
        """(setting, task, trial, rubric): one verdict per key."""
        return (self.setting, self.task, self.trial, self.rubric)


async def _judge_one(
    judge: ModelCaller,
    model: str,
    kwargs: Mapping[str, Any],
    trajectory: Trajectory,
    rendered: str,
    rubric: Rubric,
    instruction: str | None,
) -> JudgeVerdict:
    n_turns = len(trajectory.turns)
    asked = await judge.ask_json(
        model,
        judge_request(rendered, n_turns, rubric, instruction, trajectory.result.tamper),
        kwargs=kwargs,
        parse=lambda response: parse_verdict(response, n_turns),
        retry_prompt=lambda problem: RETRY_PROMPT.format(error=problem, last=n_turns),
    )
    result = trajectory.result
    common: dict[str, Any] = {
        "setting": result.setting,
        "task": result.task,
        "trial": result.trial,
        "rubric": rubric.id,
        "attempts": asked.attempts,
        "usage": asked.usage,
        "model": model,
    }
    if asked.value is None:
        # Never a guess: unknown, with why.
        error = asked.error or "no answer"
        return JudgeVerdict(answer="unknown", error=error, raw_answer=asked.answer, **common)
    answer = asked.value
    return JudgeVerdict(
        answer=answer.answer, evidence=answer.evidence, turns=answer.turns, **common
    )


def _verdicts_path(run: str | Path, path: str | Path | None) -> Path:
    return Path(path) if path is not None else Path(run) / VERDICTS_FILE


def read_verdicts(run: str | Path, *, path: str | Path | None = None) -> list[JudgeVerdict]:
    """The verdicts of a run folder (`RUN/judge.jsonl`, or `path`), the last one per
    (setting, task, trial, rubric); a torn last line from a kill is skipped.

    Args:
        run: the run folder.
        path: the verdicts file, instead of `RUN/judge.jsonl`.

    Returns:
        The verdicts; none when there is no file.
    """
    lines = read_lines(_verdicts_path(run, path), JudgeVerdict)
    return list({verdict.key: verdict for verdict in lines}.values())


async def judge_run(
    run: str | Path,
    model: str,
    *,
    rubrics: Sequence[Rubric] | None = None,
    instructions: Mapping[str, str] | None = None,
    settings: Iterable[str] | None = None,
    completion_kwargs: dict[str, Any] | None = None,
    client: LiteLLMClient | None = None,
    max_concurrency: int = 8,
    progress: bool = True,
    response_format: bool | None = None,
    max_invalid_retries: int = 1,
    retry_unknown: bool = False,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    max_action_chars: int = MAX_ACTION_CHARS,
    path: str | Path | None = None,
) -> list[JudgeVerdict]:
    """Judges every finished episode of the run folder `run` (optionally only some
    settings) on every rubric that applies to it (default: `load_rubrics()`), with the
    LiteLLM model `model`; returns the verdicts of that scope, old and new.

    Each verdict is appended to `RUN/judge.jsonl` (or `path`) as it arrives; verdicts
    already there are kept and not asked again (`retry_unknown=True` asks the unknown
    ones again). `instructions` maps task ids to their instruction text, shown to the
    judge where known. Episodes without turns are not judged (there is nothing to cite).

    Args:
        run: the run folder.
        model: the judge's LiteLLM model id.
        rubrics: the questions; None: `load_rubrics()`.
        instructions: task ids to their instruction text, shown to the judge where known.
        settings: judge only these settings; None: all.
        completion_kwargs: settings for the judge's calls.
        client: the client its calls go through, with its own limits.
        max_concurrency: judge calls in flight at most.
        progress: show a progress bar.
        response_format: True sends a strict JSON-schema `response_format`, False never,
            None where LiteLLM says the model supports one.
        max_invalid_retries: how often an invalid answer is asked about again.
        retry_unknown: ask the verdicts already "unknown" again.
        max_output_chars: cap on one turn's output in the request (head and tail kept).
        max_action_chars: cap on one turn's action or message in the request.
        path: the verdicts file, instead of `RUN/judge.jsonl`.

    Returns:
        The verdicts of that scope, old and new.

    Raises:
        ConfigurationError: an option is out of range, rubric ids repeat, the model id
            or its settings are refused, or the verdicts file holds another judge
            model's verdicts.
    """
    judge = ModelCaller(
        "judge_run",
        model,
        completion_kwargs,
        client,
        response_format,
        max_invalid_retries,
        who="judge",
    )
    if max_concurrency < 1:
        raise ConfigurationError(f"max_concurrency must be >= 1, got {max_concurrency}")
    if max_invalid_retries < 0:
        raise ConfigurationError(f"max_invalid_retries must be >= 0, got {max_invalid_retries}")
    chosen = list(rubrics) if rubrics is not None else load_rubrics()
    check_unique(chosen)
    trajectories = load_trajectories(run, settings)
    file = _verdicts_path(run, path)
    previous = read_verdicts(run, path=path)
    others = sorted({v.model for v in previous if v.model != model})
    if others:
        raise ConfigurationError(
            f"{file} holds verdicts of another judge model ({', '.join(others)}); "
            f"pass path= to keep the verdicts of {model!r} in a separate file"
        )
    done = {v.key for v in previous if not (retry_unknown and v.answer == "unknown")}
    todo = [
        (trajectory, rubric)
        for trajectory in trajectories
        if trajectory.turns
        for rubric in chosen
        if rubric.applies(trajectory) and (*trajectory.result.key, rubric.id) not in done
    ]
    wanted = {
        (*t.result.key, r.id) for t in trajectories if t.turns for r in chosen if r.applies(t)
    }
    if todo:
        # Without a client of its own, the judge's calls are capped at max_concurrency.
        judge.bind_client(LiteLLMClient(max_concurrency=max_concurrency))
        await _judge_all(
            todo,
            judge=judge,
            model=model,
            kwargs=await judge.answer_kwargs(model, "verdict", verdict_schema()),
            instructions=instructions or {},
            file=file,
            limit=max_concurrency,
            progress=progress,
            limits=(max_output_chars, max_action_chars),
        )
    return [v for v in read_verdicts(run, path=path) if v.key in wanted]


async def _judge_all(
    todo: list[tuple[Trajectory, Rubric]],
    *,
    judge: ModelCaller,
    model: str,
    kwargs: Mapping[str, Any],
    instructions: Mapping[str, str],
    file: Path,
    limit: int,
    progress: bool,
    limits: tuple[int, int],
) -> None:
    from tqdm.auto import tqdm

    # Render each trajectory once; all its rubrics share the text.
    rendered: dict[tuple[str, str, int], str] = {}
    for trajectory, _ in todo:
        if trajectory.result.key not in rendered:
            rendered[trajectory.result.key] = render_trajectory(
                trajectory, max_output_chars=limits[0], max_action_chars=limits[1]
            )
    bar = tqdm(total=len(todo), unit="verdict", disable=not progress, dynamic_ncols=True)
    counts = {"yes": 0, "unknown": 0}
    semaphore = asyncio.Semaphore(limit)
    lock = asyncio.Lock()

    async def one(trajectory: Trajectory, rubric: Rubric) -> None:
        async with semaphore:
            verdict = await _judge_one(
                judge,
                model,
                kwargs,
                trajectory,
                rendered[trajectory.result.key],
                rubric,
                instructions.get(trajectory.task),
            )
        async with lock:
            append_line(file, verdict.model_dump_json())
            counts[verdict.answer] = counts.get(verdict.answer, 0) + 1
            bar.set_postfix(flagged=counts["yes"], unknown=counts["unknown"], refresh=False)
            bar.update(1)

    try:
        await gather_all([one(t, r) for t, r in todo])
    finally:
        bar.close()

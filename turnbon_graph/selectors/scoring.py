"""Pointwise scoring: each candidate scored on its own, the best one executed.

Scores come from an LLM judge with a rubric, or from a reward function or reward model
of your own (BoN+ORM). Reward models correlated only weakly with judged quality on
open-ended tasks in *Test-Time Scaling in the Wild*; the scores are recorded per
candidate so their value can be measured on your tasks.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._sync import sized_for_loop
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.base import Selection, fall_back
from turnbon_graph.selectors.model_call import Asked, ModelCaller, gather_all
from turnbon_graph.selectors.prompting import (
    answer_section,
    candidate_block,
    parse_reply,
    public_message,
    retry_prompt,
    selector_prompt,
    transcript_section,
    two_messages,
)
from turnbon_graph.turn.candidates import Candidate

Reward = Callable[[Sequence[BaseMessage], AIMessage], "float | Awaitable[float]"]
"""(transcript, candidate message) -> score; higher is better. May be async."""

MAX_SCORE = 10.0

DEFAULT_RUBRIC = """\
- Follows the task's instructions exactly.
- Makes real progress toward the deliverable, or tests and verifies recent work.
- Investigates a failure instead of repeating an action that just failed.
- Is not premature, destructive, or a claim of success without evidence."""

SCORING_SYSTEM_PROMPT = selector_prompt(
    "A candidate action was proposed for its next turn. Score it on its own, from 0 "
    "(useless, wrong or harmful) to 10 (the best possible next step), by this rubric:",
    "{rubric}",
)
"""A template: `.format(rubric=...)`; nothing else in it has braces."""

SCORING_RETRY_PROMPT = retry_prompt(", with score a number from 0 to 10.")


class ScoreAnswer(BaseModel):
    """What a scoring judge must answer: a reason and a score from 0 to 10."""

    reason: str = ""
    score: float


def score_schema() -> dict[str, Any]:
    """The JSON schema of a scoring judge's answer."""
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "description": "One or two sentences on why."},
            "score": {"type": "number", "description": "From 0 (worst) to 10 (best)."},
        },
        "required": ["reason", "score"],
        "additionalProperties": False,
    }


def scoring_request(
    messages: Sequence[BaseMessage], candidate: Candidate, rubric: str
) -> list[dict[str, str]]:
    """The two-message scoring request for one candidate, by `rubric`."""
    user = (
        f"{transcript_section(messages)}\n\n"
        "## Candidate next action\n"
        f"{candidate_block(0, candidate)}\n\n"
        f"{answer_section(score_schema(), 'score is a number from 0 to 10.')}"
    )
    return two_messages(SCORING_SYSTEM_PROMPT.format(rubric=rubric), user)


def parse_score(response: Any) -> tuple[float | None, str, str | None]:
    """(score or None, raw text, problem) of a judge's reply; never raises on a bad answer."""
    answer, raw, problem = parse_reply(response, ScoreAnswer, "a JSON object with a number score")
    if answer is None:
        return None, raw, problem
    if not 0 <= answer.score <= MAX_SCORE:
        return None, raw, f"score {answer.score:g} is out of range 0..10"
    return answer.score, raw, None


class ScoringSelector(ModelCaller):
    """Scores every candidate on its own and executes the best (ties: the earliest).

    Either `judge` (a LiteLLM model id) scores each candidate 0-10 by `rubric`, one call
    per candidate, concurrently: pointwise, so no candidate's score depends on the others
    or on its position, and one bad answer costs one score, not the turn. Or `reward`
    (`reward(messages, candidate_message) -> float`, sync or async) scores them: a reward
    function or a reward model behind one (BoN+ORM). Neither sees private reasoning.

    A candidate whose score could not be had (a failed call or unusable answer after one
    retry, a reward that raised) gets None; if none could be scored the selector falls
    back to majority/first. With `min_score`, a best score below it rejects every
    candidate (the turn resamples once, then falls back). Scores go to `Selection.scores`.

    Args:
        judge: a LiteLLM model id that scores by `rubric`; give this or `reward`.
        rubric: what the judge scores by; None: a default rubric for agent actions
            (follows the instructions, makes progress, investigates failures, is not
            premature or destructive).
        reward: `reward(messages, candidate_message) -> float`, sync or async, higher is
            better; give this or `judge`.
        min_score: a best score below it rejects every candidate.
        completion_kwargs: settings for the judge's calls (not with `reward`).
        client: as for `LLMSelector` (without one, a graph binds it to the graph's
            client).
        response_format: as for `LLMSelector`.
        max_invalid_retries: how often an unusable score is asked about again.

    Raises:
        ConfigurationError: both or neither of `judge` and `reward` are given, `reward`
            is not callable, `rubric` or `completion_kwargs` come with `reward`, or the
            judge's settings are refused (as for `LLMSelector`).
    """

    def __init__(
        self,
        judge: str | None = None,
        *,
        rubric: str | None = None,
        reward: Reward | None = None,
        min_score: float | None = None,
        completion_kwargs: dict[str, Any] | None = None,
        client: LiteLLMClient | None = None,
        response_format: bool | None = None,
        max_invalid_retries: int = 1,
    ) -> None:
        if (judge is None) == (reward is None):
            raise ConfigurationError(
                "ScoringSelector needs exactly one of judge= (a LiteLLM model id that scores "
                "by a rubric) or reward= (a function (messages, candidate_message) -> float)"
            )
        if reward is not None and not callable(reward):
            raise ConfigurationError(f"reward must be a callable returning a float, got {reward!r}")
        if reward is not None and (rubric is not None or completion_kwargs is not None):
            raise ConfigurationError(
                "rubric and completion_kwargs apply to an LLM judge; a reward function "
                "takes neither"
            )
        # No judge (a reward function): no model is called and completion_kwargs is {}.
        super().__init__(
            "ScoringSelector",
            judge,
            completion_kwargs,
            client,
            response_format,
            max_invalid_retries,
        )
        self.judge = judge
        self.rubric = rubric or DEFAULT_RUBRIC
        self.reward = reward
        self.min_score = min_score

    @property
    def name(self) -> str:
        """`score:<judge>` or `reward:<the reward function's name>`."""
        if self.judge is not None:
            return f"score:{self.judge}"
        return f"reward:{getattr(self.reward, '__name__', type(self.reward).__name__)}"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Scores every candidate, concurrently.

        Args:
            messages: the transcript each candidate is scored as the answer to.
            candidates: each scored on its own, all at once.

        Returns:
            The best-scored candidate (ties: the earliest), with `scores`; every
                candidate rejected when the best is under `min_score`; the majority or
                the first, with `fallback`, when none could be scored.
        """
        if self.judge is not None:
            results = await gather_all([self._judge(messages, c) for c in candidates])
        else:
            results = await gather_all([self._reward(messages, c) for c in candidates])
        scores = [r.value for r in results]
        usage = sum((r.usage for r in results), Usage())
        answer = json.dumps(
            [
                {"index": c.index, "score": r.value, "answer": r.answer, "error": r.error}
                for c, r in zip(candidates, results, strict=True)
            ]
        )
        common: dict[str, Any] = {
            "selector": self.name,
            "scores": scores,
            "answer": answer,
            "usage": usage,
        }
        scored = [(s, p) for p, s in enumerate(scores) if s is not None]
        if not scored:
            first = next(r.error for r in results if r.error)
            return fall_back(candidates, f"no candidate could be scored ({first})", **common)
        best, position = max(scored, key=lambda sp: (sp[0], -sp[1]))
        rejected = self.min_score is not None and best < self.min_score
        return Selection(index=position, none_acceptable=rejected, **common)

    async def _judge(self, messages: Sequence[BaseMessage], candidate: Candidate) -> Asked[float]:
        assert self.judge is not None
        return await self.ask_json(
            self.judge,
            await sized_for_loop(messages, scoring_request, messages, candidate, self.rubric),
            kwargs=await self.answer_kwargs(self.judge, "score", score_schema()),
            parse=parse_score,
            retry_prompt=lambda problem: SCORING_RETRY_PROMPT.format(error=problem),
        )

    async def _reward(self, messages: Sequence[BaseMessage], candidate: Candidate) -> Asked[float]:
        assert self.reward is not None and candidate.message is not None
        transcript = [public_message(m) for m in messages]
        action = public_message(candidate.message)
        assert isinstance(action, AIMessage)
        try:
            value = self.reward(transcript, action)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return Asked(None, None, Usage(), f"the reward raised {type(exc).__name__}: {exc}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(
                f"the reward function {self.name!r} returned {value!r}; it must return a "
                "number (higher is better), or an awaitable of one"
            )
        if not math.isfinite(value):
            return Asked(None, None, Usage(), f"the reward returned {value}")
        return Asked(float(value), None, Usage())

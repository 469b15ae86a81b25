"""Why every episode of a run failed, read from the episodes' error texts, and advice that
can work: `--redo-errors` reruns a run folder's agent errors with the same settings
(`bench.runs.RunSettings`: the environment, the model, the selector, N, the trials, the
tasks), so it is advice only where something outside those settings is to fix (a key,
an endpoint, a task's setup). A wrong model id is one of the settings: fixed, it makes a
new run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["model", "call", "other"]
"""What an agent error says failed: the model id (the provider knows no such model), a
model call for another reason (key, endpoint, network, the provider), or not a model
call at all (the task's setup, the sandbox, the verifier, a tool)."""

CALL_ERRORS = frozenset(
    {
        "AllCandidatesFailedError",
        "CallFailedError",
        "APIConnectionError",
        "APIError",
        "AuthenticationError",
        "BadRequestError",
        "BudgetExceededError",
        "ContentPolicyViolationError",
        "InternalServerError",
        "NotFoundError",
        "PermissionDeniedError",
        "RateLimitError",
        "ServiceUnavailableError",
        "Timeout",
        "UnprocessableEntityError",
    }
)
"""The error classes an episode's error text starts with when a model call failed: the
turn's (`AllCandidatesFailedError`), a redacted provider error, LiteLLM's own."""

_NO_SUCH_MODEL = re.compile(
    r"LLM Provider NOT provided|model_not_found|no such model|unknown model|invalid model"
    r"|\bmodel\b[^.;]{0,120}\b(does not exist|not found|is not available|not supported)"
    r"|\bNotFoundError\b[^;]{0,200}\bmodel\b",
    re.IGNORECASE,
)
"""A provider's words for a model id it does not serve (OpenAI's "The model `x` does not
exist", vLLM's, Ollama's "model 'x' not found", Anthropic's not_found_error "model: x",
LiteLLM's "LLM Provider NOT provided")."""

_KEY = re.compile(r"needs \S+_API_KEY|refused the key")


def call_error(text: str) -> str | None:
    """The failed model call's own error in an episode's error text (the last candidate
    error of an `AllCandidatesFailedError`); None when no model call failed."""
    head, _, rest = text.partition(":")
    if head == "AllCandidatesFailedError":
        last = text.partition("; last error: ")[2] or rest
        return last.split(". Check the model id, api_base and credentials")[0]
    if head in CALL_ERRORS or (head == "ConfigurationError" and _KEY.search(rest)):
        return text
    return None


def kind_of(text: str | None) -> Kind:
    """What an episode's error text says failed (`Kind`)."""
    call = call_error(text or "")
    if call is None:
        return "other"
    return "model" if _NO_SUCH_MODEL.search(call) else "call"


@dataclass(frozen=True)
class Failed:
    """What one episode that ended in an agent error left: its task, error and turns."""

    task: str
    error: str | None
    turns: int


def first_words(text: str, limit: int = 300) -> str:
    """An error text up to its first sentence's end (or `limit` characters)."""
    found = re.search(r"[;.](\s|$)", text)
    cut = text[: found.start()] if found else text
    return cut if len(cut) <= limit else cut[:limit].rstrip() + "..."


def advice(failed: Sequence[Failed], settings: str, model: str | None, rerun: str) -> str:
    """What to do when every episode of `settings` (e.g. "N=1, N=4") failed before a
    verdict, from what their errors say failed. `rerun`: how a rerun of the same run
    runs the failed episodes again (bench: the same command with --redo-errors), or ""
    where there is no such way (rollouts: a new --run folder)."""
    kinds = [kind_of(f.error) for f in failed]
    every = f"Every episode of {settings} failed before a verdict"
    if "model" in kinds:
        named = f"the model id {model}" if model else "the model id"
        refused = f", so {rerun} with another --model would be refused" if rerun else ""
        return (
            f"{every}: {named} names no model the provider serves (the error above says "
            f"so). A run folder keeps the model it was made with{refused}: run the command "
            "again with the right --model and a new run folder (--run NEW, or no --run for a "
            "new one under runs/)."
        )
    if "call" in kinds:
        then = (
            f"then run the same command with {rerun} (a fixed key, --api-base or "
            "--timeout keeps the run's settings; another --model or --selector needs a new "
            "--run folder)."
            if rerun
            else "then run the command again with a new --run folder (the episodes "
            "recorded in this one count as done and would be skipped)."
        )
        return (
            f"{every} in its model calls: check the model id, the api_base and the API key "
            f"(the error above says which), {then}"
        )
    first = next((f for f in failed if f.error), None)
    what = first_words(first.error or "") if first is not None else "no error was recorded"
    where = " at its start" if failed and all(f.turns == 0 for f in failed) else ""
    then = (
        f"then run the same command with {rerun}."
        if rerun
        else "then run the command again with a new --run folder."
    )
    return (
        f"Every episode of {settings} failed{where}, before a verdict and not in a model "
        f"call, so the model id, the api_base and the API key are not the cause: {what}. "
        f"Fix that (the environment or the task), {then}"
    )

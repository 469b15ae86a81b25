"""What the commands' flags accept: the checks of their values (positive numbers,
shares, model ids, selector names, each saying what was meant) and the names they
share. Only the standard library: `turnbon --help` answers at once."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Sequence

STUB_MODEL = "stub"
"""--model stub: the environment's own scripted stub policy on a loopback server."""
INTERRUPTED = 130
"""The shell's code for a run stopped by Ctrl-C."""
DEFAULT_ENV = "terminal"
SANDBOXES = ("bwrap", "container")
"""`--sandbox`: an option of the environment's factory (the terminal environment's)."""
SHELLS = ("session", "fresh")
"""`--shell`: an option of the terminal environment's factory."""
ENVIRONMENT_OPTIONS = ("sandbox", "force_build", "shell")
"""The flags passed to the environment's factory as keyword arguments, when given."""
SELECTOR_KEYWORDS = ("first", "random", "majority")
"""The `--selector` names of selectors that call no model (`models.make_selector`)."""
MODEL_HINT = (
    "a LiteLLM model id such as openai/gpt-4o-mini, or --model stub to try it offline "
    "(the environment's scripted stub policy: no API key, no network)"
)
"""What a command that requires --model says when it is missing."""


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not above 0")
    return value


def finite_positive(text: str) -> float:
    """argparse type: a finite number above 0 (`inf` and `nan` are refused)."""
    value = positive_float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


MAX_MEGABYTES = 1024 * 1024
"""The largest size in MiB a size flag takes (1 TiB): past it, a typo."""


def megabytes(text: str) -> float:
    """argparse type: a size in MiB, finite, above 0 and at most `MAX_MEGABYTES`."""
    value = finite_positive(text)
    if value > MAX_MEGABYTES:
        raise argparse.ArgumentTypeError(
            f"{value:g} MiB is more than {MAX_MEGABYTES:,} MiB (1 TiB)"
        )
    return value


def share(text: str) -> float:
    """argparse type: a number above 0 and at most 1."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value:g} is above 1")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def near_keyword(text: str, keywords: Sequence[str]) -> str | None:
    """The keyword a name with no provider prefix nearly is (`majorty`: majority, `stbu`:
    stub), or None. No model LiteLLM knows is that close to a keyword (tested against its
    model list), so no LiteLLM import is needed to tell."""
    if text in keywords or "/" in text:
        return None
    close = difflib.get_close_matches(text.lower(), keywords, n=1, cutoff=0.75)
    return close[0] if close else None


def selector_name(text: str) -> str:
    """argparse type of --selector: a keyword or a LiteLLM model id, as given. A near
    miss of a keyword (`majorty`, `First`: `near_keyword`) is refused here, with the
    keyword it resembles. Other names are model ids, checked against LiteLLM before
    anything runs."""
    meant = near_keyword(text, SELECTOR_KEYWORDS)
    if meant:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no selector: did you mean {meant}? {selector_choices()}"
        )
    return text


def model_name(text: str) -> str:
    """argparse type of --model: `stub` or a LiteLLM model id, as given. A near miss of
    `stub` (`stbu`, `Stub`: `near_keyword`) is refused here; other names are model ids,
    checked against LiteLLM before anything runs."""
    if near_keyword(text, (STUB_MODEL,)):
        raise argparse.ArgumentTypeError(
            f"{text!r} is no model id: did you mean {STUB_MODEL}? --model takes {MODEL_HINT}"
        )
    return text


def selector_choices() -> str:
    """The selectors --selector takes, in words."""
    return (
        f"(selectors that call no model: {', '.join(SELECTOR_KEYWORDS)}; anything else is "
        "a LiteLLM model id for an LLM selector, e.g. openai/gpt-4o-mini)"
    )

"""The behaviour tagger: `tag_command` tags a command line from its facts and the
earlier turns' commands (`tests_last_edit` replays the history, `loops` compares with the
previous command), `declares_complete` reads a final message."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

from turnbon_graph.analysis.behaviours.facts import line_facts
from turnbon_graph.analysis.behaviours.tables import COMPLETION, NEGATION, Fact

TAGS: tuple[str, ...] = (
    "edits_file",
    "tests_last_edit",
    "runs_test",
    "file_ops",
    "installs_package",
    "read_only",
    "loops",
    "declares_complete",
)
"""The behaviours, in the order of Figure 4 and Table 4 (the extracted paper text lacks the
rows for the last two, which keep the order they were specified in)."""


class Executed(NamedTuple):
    """One earlier turn's executed command and its exit code (None: unknown)."""

    command: str
    """The command line."""
    exit_code: int | None
    """Its exit code; None when unknown."""


def tag_command(command: str, history: Sequence[tuple[str, int | None]] | None = None) -> set[str]:
    """The behaviours (names from `TAGS`) that the shell command line `command` shows.

    Never raises: a line that does not parse is tagged from a best-effort word split.

    Args:
        command: the shell command line.
        history: the earlier turns' executed commands and exit codes, oldest first
            (plain tuples or `Executed`); it decides `tests_last_edit` and `loops`.

    Returns:
        The behaviours' names.
    """
    history = list(history or [])
    facts = line_facts(command)
    tags: set[str] = set()
    if any(f.edits for f in facts):
        tags.add("edits_file")
    if _runs_untested_edit(facts, history):
        tags.add("tests_last_edit")
    if any(f.test for f in facts):
        tags.add("runs_test")
    if any(f.file_op for f in facts):
        tags.add("file_ops")
    if any(f.install for f in facts):
        tags.add("installs_package")
    # A bare `echo done` declares only when it is the whole action, not after `make &&`.
    declares = any(f.declares for f in facts) or (len(facts) == 1 and facts[0].says_done)
    if declares:
        tags.add("declares_complete")
    if facts and all(f.read for f in facts) and not declares:
        tags.add("read_only")
    if history and _repeats_failure(command, history[-1]):
        tags.add("loops")
    return tags


def declares_complete(text: str) -> bool:
    """Whether an action's text (a final message with no command) declares the task
    complete: it opens with "Done" / "Complete" / "Finished", or a sentence says that the
    task (the work, everything) is complete / done / finished / solved, that the agent
    completed the task, or that nothing more is needed, with no negation in that sentence
    ("not", "n't", "cannot", "unable", "incomplete"). Conservative: a summary of what was
    done that never says the task is complete does not count.

    Args:
        text: the action's text.

    Returns:
        Whether it declares the task complete.
    """
    if _OPENS_DONE.match(text) and not NEGATION.search(_SENTENCE_END.split(text, 1)[0]):
        return True
    return any(
        COMPLETION.search(sentence) and not NEGATION.search(sentence)
        for sentence in _SENTENCE_END.split(text)
    )


# ---------------------------------------------------------------------------------------
# Declaring completion and looping


_OPENS_DONE = re.compile(
    r"\s*(?:all\s+)?(?:done|complete|completed|finished)\s*(?:[.!:,;\u2014-]|$)", re.IGNORECASE
)
"""A message that opens with the word alone: "Done.", "Done: the solution ran." (not
"Complete rewrite needed")."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _normalise(command: str) -> str:
    return " ".join(command.split())


def _repeats_failure(command: str, previous: tuple[str, int | None]) -> bool:
    """Loops on a command: the same line (up to whitespace) as the previous executed
    command, which failed (a known, non-zero exit code)."""
    before, exit_code = previous
    line = _normalise(command)
    return bool(line) and exit_code not in (None, 0) and _normalise(before) == line


def _runs_untested_edit(facts: list[Fact], history: list[tuple[str, int | None]]) -> bool:
    """Tests its last edit (Table 4): "Runs code while the latest edit is untested, i.e., no
    turn since the edit has run or tested anything." The history is replayed in order: an
    edit leaves the workspace untested, running code or a test or check tests it. Within
    one line the same holds in textual order (`cat > a.py <<EOF ... EOF && python a.py`).
    The run need not touch the edited file: the definition does not ask for it."""
    untested = False
    for earlier, _ in history:
        _, untested = _replay(_cached_facts(earlier), untested)
    ran_untested, _ = _replay(facts, untested)
    return ran_untested


@functools.lru_cache(maxsize=4096)
def _cached_facts(command: str) -> tuple[Fact, ...]:
    """A history command's facts: an analysis replays the same history for every turn."""
    return tuple(line_facts(command))


def _replay(facts: Sequence[Fact], untested: bool) -> tuple[bool, bool]:
    """(whether code ran while an edit was untested, whether an edit is untested after)."""
    ran_untested = False
    for fact in facts:
        if fact.runs:
            ran_untested = ran_untested or untested
            untested = False
        if fact.edits:
            untested = True
    return ran_untested, untested

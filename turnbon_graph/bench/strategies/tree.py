"""The search tree of an episode: one line per node in the run folder's tree file
(`bench.runs.tree_path`), written once the episode is over and every node's fate is known.

A node is one step of one trajectory: the action taken (as short text), the environment
it ran in (`fork`: the root episode is `e0`, each fork the next number), its value score,
the tokens it cost (its share of the generator call, and its value call), and its fate:

    kept      it survived its turn's cut and was extended
    pruned    it was cut (its fork closed), or could not run (`error` says why)
    held      its trajectory ended (`ended` says how) and waited for the choice
    chosen    the ended trajectory that was verified (its last node)
    rollout   a step of a lookahead rollout: run in a fork of its own to score the
              candidate it continues (its parent, or its parent's rollout), then thrown
              away; the rollout's last node has the score it led to

A finished trajectory's last node (held, chosen, or pruned with `ended` set) is a leaf:
the verifier judged it before its environment closed (`passed`). An `escalate` node also
has the agreement of the turn's first candidates and, when that was below `--agree`, how
the turn was sampled again (`escalated`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from turnbon_graph.bench.running.runs import append_line

Fate = Literal["kept", "pruned", "held", "chosen", "rollout"]
ACTION_CHARS = 200
"""Characters of an action kept in the tree file."""


class TreeNode(BaseModel):
    """One step of a search's tree, as the tree file records it."""

    id: str
    parent: str | None
    turn: int
    """The trajectory's turn this step was (0: the root, the task as it starts)."""
    action: str
    value: float | None = None
    fate: Fate = "kept"
    fork: str
    tokens: int = 0
    copies: int | None = None
    """Particle filtering: how many particles the resampling drew from it."""
    proposed: int | None = None
    """How many of its parent's candidates proposed its action (they run once, as one
    child); None for a root, or a node written before it was recorded."""
    ended: str | None = None
    passed: bool | None = None
    """A leaf's verdict (pass or not); None for a node that is no leaf, or a leaf the
    verifier gave no verdict on."""
    error: str | None = None
    agreement: float | None = None
    """escalate: the agreement of the turn's first candidates (the share of the most
    common action); None for the other strategies."""
    escalated: str | None = None
    """escalate: how the turn was sampled again when that agreement was below `--agree`
    (`reasoning_effort=<level>`, or `step by step`); None when it was not."""


def short_action(content: str, commands: list[str]) -> str:
    """An action as one short line: its commands, else its text."""
    text = " ; ".join(commands) if commands else f"say: {content}"
    text = " ".join(text.split())
    return text if len(text) <= ACTION_CHARS else text[: ACTION_CHARS - 1] + "…"


def write_tree(path: Path, nodes: list[TreeNode]) -> None:
    """The tree file, from scratch (an unfinished earlier attempt's is replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    for node in nodes:
        append_line(path, json.dumps(node.model_dump(), ensure_ascii=False))

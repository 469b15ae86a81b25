"""What a search's branches start from: every child of a trajectory that branches runs in
a fork of its own (the first child too), so siblings start from the same state: the
parent's files, none of its processes, an empty /tmp; and a fork sees its work folder at
the path its parent did, so an absolute path the agent wrote still works. Real
bubblewrap sandboxes, LiteLLM's real HTTP path to the loopback stub."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration_tests.test_strategies import check_tree, one_episode, tree
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.value import is_value_request
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, choice, tool_call

LEAVE_STATE = (
    "echo kept > /tmp/mark && (sleep 301 >/dev/null 2>&1 &) && "
    "cp /bin/bash ./mybash && printf '#!%s/mybash\\necho shebang-ran\\n' \"$PWD\" > tool "
    "&& chmod +x tool && pwd"
)
"""The first turn: a file in the sandbox's /tmp, a process left running, and a script
whose shebang is an absolute path into the work folder."""
LOOK = (
    "(test -e /tmp/mark && echo has-mark || echo no-mark); "
    "(pgrep -f 'sleep 30[1]' >/dev/null && echo has-sleep || echo no-sleep); ./tool; pwd; echo {}"
)
"""The second turn, in each branch: what it sees of the first (`30[1]`: the pattern
matches the sleep, not the shell whose command line holds the pattern)."""
TRANSCRIPT = re.compile(r"<transcript>\n(.*?)\n</transcript>", re.DOTALL)


def branching_after_state(
    looks: list[str],
) -> Callable[[CapturedRequest], dict[str, Any]]:
    """One action at the start (every candidate the same: one child, no fork), then N
    distinct looks (`looks`, one per candidate), then "Done."; every value 5."""

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        messages = body.get("messages") or []
        if is_value_request(messages):
            return chat_completion(json.dumps({"reason": "even", "score": 5}))
        n = int(body.get("n") or 1)
        ran = sum(1 for m in messages if m.get("role") == "tool")
        if ran == 0:
            commands = [LEAVE_STATE] * n
        elif ran == 1:
            commands = looks[:n]
        else:
            return chat_completion(choices=[choice("Done.", index=k) for k in range(n)])
        return chat_completion(
            choices=[
                choice(None, [tool_call("shell", {"command": c})], index=k)
                for k, c in enumerate(commands)
            ]
        )

    return respond


def observations(stub: StubServer, command: str) -> list[str]:
    """What `command` printed, as every request made after it ran shows it: a generator
    request's tool message, or a value request's transcript (a branch cut right after
    the value call makes no other request)."""
    seen = []
    for request in stub.requests:
        messages = (request.body or {}).get("messages") or []
        if is_value_request(messages):
            transcript = TRANSCRIPT.search(str(messages[-1]["content"]))
            assert transcript is not None
            entries = [json.loads(line) for line in transcript.group(1).splitlines()]
            for before, entry in itertools.pairwise(entries):
                ran = [c["args"].get("command") for c in before.get("tool_calls") or []]
                if entry["role"] == "tool" and ran == [command]:
                    seen.append(str(entry["content"]))
            continue
        calls = {
            c["id"]: json.loads(c["function"]["arguments"])["command"]
            for m in messages
            for c in m.get("tool_calls") or []
        }
        for message in messages:
            if message.get("role") == "tool" and calls.get(message.get("tool_call_id")) == command:
                seen.append(str(message["content"]))
    return sorted(set(seen))


async def test_siblings_start_from_the_same_state(stub: StubServer, tmp_path: Path) -> None:
    """Beam W=2, N=2: the first turn leaves a file in /tmp and a process running; the
    second branches in two. Both branches see the same: the parent's files (its script
    runs, by its absolute shebang, at the work folder's path), no /tmp file, no process.
    Before, the first child ran in its parent's own environment and saw both."""
    looks = [LOOK.format("one"), LOOK.format("two")]
    stub.script(branching_after_state(looks))
    row, run = await one_episode(stub, tmp_path, StrategySpec(name="beam", width=2))
    [first] = observations(stub, LEAVE_STATE)
    workdir = first.splitlines()[0]
    seen = {look: observations(stub, look) for look in looks}
    assert all(len(outputs) == 1 for outputs in seen.values()), seen
    for look, [output] in seen.items():
        lines = output.splitlines()
        assert lines[:4] == ["no-mark", "no-sleep", "shebang-ran", workdir], (look, output)
    nodes = tree(run, row)
    check_tree(nodes)
    second = [n for n in nodes if n["turn"] == 2]
    [parent] = [n for n in nodes if n["turn"] == 1]
    assert len(second) == 2 and parent["fork"] not in {n["fork"] for n in second}
    assert len({n["fork"] for n in second}) == 2
    assert row.search is not None and row.search.forks == 2  # the first child's too


async def test_particles_drawn_twice_start_from_the_same_state(
    stub: StubServer, tmp_path: Path
) -> None:
    """Particle filtering, W=2: after the first turn the one particle is drawn twice and
    goes on as two copies, each in a fork of its own; both see the same state."""
    looks = [LOOK.format("one"), LOOK.format("two")]

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        messages = body.get("messages") or []
        ran = sum(1 for m in messages if m.get("role") == "tool")
        n = int(body.get("n") or 1)
        if ran == 1 and not is_value_request(messages):
            # each copy's request is the same: alternate the looks by how often it came
            count = sum(
                1
                for r in stub.requests
                if sum(1 for m in (r.body or {}).get("messages") or [] if m.get("role") == "tool")
                == 1
                and not is_value_request((r.body or {}).get("messages") or [])
            )
            command = looks[(count - 1) % 2]
            calls = [tool_call("shell", {"command": command})]
            return chat_completion(choices=[choice(None, calls, index=k) for k in range(n)])
        return branching_after_state(looks)(request)

    stub.script(respond)
    spec = StrategySpec(name="particle", width=2)
    row, run = await one_episode(stub, tmp_path, spec)
    [first] = observations(stub, LEAVE_STATE)
    workdir = first.splitlines()[0]
    outputs = [o for look in looks for o in observations(stub, look)]
    assert len(outputs) == 2, outputs
    for output in outputs:
        assert output.splitlines()[:4] == ["no-mark", "no-sleep", "shebang-ran", workdir], output
    check_tree(tree(run, row))

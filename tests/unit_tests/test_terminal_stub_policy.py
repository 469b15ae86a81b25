"""The scripted stand-in model: what it proposes, what it selects, and that choosing
among four samples solves more tasks than one sample does."""

from __future__ import annotations

import json
import random
from typing import Any

from turnbon_graph.testing import SELECTOR_PROMPT_PREFIX, CapturedRequest
from turnbon_terminal import TerminalTask, load_tasks, stub_policy
from turnbon_terminal.stub_policy import DONE, GIVE_UP

TASKS = load_tasks()
SOLUTIONS = {t.id: (t.solution_script.read_text() if t.solution_script else "") for t in TASKS}


def request(messages: list[dict[str, Any]]) -> CapturedRequest:
    return CapturedRequest("/v1/chat/completions", {}, {"messages": messages}, 0.0)


def answer(response: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = response["choices"][0]["message"]
    return message


def command_of(message: dict[str, Any]) -> str | None:
    calls = message.get("tool_calls") or []
    return str(json.loads(calls[0]["function"]["arguments"])["command"]) if calls else None


def selector_request(shown: list[dict[str, Any]]) -> CapturedRequest:
    blocks = "\n".join(
        f'<candidate index="{i}">\n{json.dumps(action)}\n</candidate>'
        for i, action in enumerate(shown)
    )
    return request(
        [
            {"role": "system", "content": f"{SELECTOR_PROMPT_PREFIX} in a turn-level agent."},
            {"role": "user", "content": f"## Candidate next actions\n{blocks}"},
        ]
    )


def shown_action(message: dict[str, Any]) -> dict[str, Any]:
    command = command_of(message)
    calls = [{"name": "shell", "args": {"command": command}}] if command else []
    return {"content": message.get("content") or "", "tool_calls": calls}


def test_generator_proposes_solution_inspection_or_finish() -> None:
    policy = stub_policy(TASKS, seed=1)
    task = next(t for t in TASKS if t.id == "sales-total")
    first = [{"role": "user", "content": task.spec.instruction}]
    seen = {"solve": 0, "inspect": 0, "finish": 0}
    for _ in range(200):
        message = answer(policy(request(first)))
        command = command_of(message)
        if command == SOLUTIONS["sales-total"]:
            seen["solve"] += 1
        elif command is not None:
            assert command in ("ls -la", "env | sort") or command.startswith("cat ")
            seen["inspect"] += 1
        else:
            assert message["content"] == GIVE_UP
            seen["finish"] += 1
    assert all(count > 20 for count in seen.values()), seen


def test_generator_says_done_after_the_solution_ran() -> None:
    policy = stub_policy(TASKS)
    task = TASKS[0]
    arguments = json.dumps({"command": SOLUTIONS[task.id]})
    call = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": arguments}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": task.spec.instruction},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "[exit code 0]"},
    ]
    assert answer(policy(request(messages)))["content"] == DONE
    unknown: list[dict[str, Any]] = [{"role": "user", "content": "Write a poem."}]
    assert command_of(answer(policy(request(unknown)))) is None


def test_selector_prefers_the_solution_else_the_first() -> None:
    policy = stub_policy(TASKS)
    solution = SOLUTIONS["word-frequency"]
    shown: list[dict[str, Any]] = [
        {"content": "", "tool_calls": [{"name": "shell", "args": {"command": "ls -la"}}]},
        {"content": GIVE_UP, "tool_calls": []},
        {"content": "", "tool_calls": [{"name": "shell", "args": {"command": solution}}]},
    ]
    picked = json.loads(answer(policy(selector_request(shown)))["content"])
    assert picked["selected_index"] == 2
    picked = json.loads(answer(policy(selector_request(shown[:2])))["content"])
    assert picked["selected_index"] == 0


def simulate(policy: Any, task: TerminalTask, n: int, rng: random.Random, turns: int = 10) -> bool:
    """One episode as the engine plays it: N samples, a selector call unless all agree."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.spec.instruction}]
    solved = False
    for turn in range(turns):
        samples = [answer(policy(request(messages))) for _ in range(n)]
        actions = [shown_action(s) for s in samples]
        chosen = samples[0]
        if any(a != actions[0] for a in actions):
            order = list(range(n))
            rng.shuffle(order)  # the selector sees a shuffled order
            picked = json.loads(
                answer(policy(selector_request([actions[i] for i in order])))["content"]
            )
            chosen = samples[order[picked["selected_index"]]]
        command = command_of(chosen)
        if command is None:
            return solved
        solved = solved or command == SOLUTIONS[task.id]
        function = {"name": "shell", "arguments": json.dumps({"command": command})}
        call = {"id": f"c{turn}", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{turn}", "content": f"ran {turn}"},
        ]
    return False


def test_best_of_four_solves_clearly_more_often_than_one_sample() -> None:
    rng = random.Random(0)
    rates = {}
    for n in (1, 4):
        policy = stub_policy(TASKS, seed=7)
        runs = [simulate(policy, task, n, rng) for task in TASKS for _ in range(8)]
        rates[n] = sum(runs) / len(runs)
    assert 0.35 < rates[1] < 0.7, rates
    assert rates[4] > 0.8, rates
    assert rates[4] - rates[1] > 0.25, rates


def test_it_bills_the_prompt_it_was_sent_and_honours_max_tokens() -> None:
    policy = stub_policy(TASKS)
    task = TASKS[0]
    messages = [{"role": "user", "content": task.instruction_text}]
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {}}}]
    size = len(json.dumps(messages)) + len(json.dumps(tools))
    body = {"messages": messages, "tools": tools, "n": 3, "seed": 1}
    free = policy(CapturedRequest("/v1/chat/completions", {}, body, 0.0))
    assert free["usage"] == {
        "prompt_tokens": -(-size // 4),  # a token per 4 characters, rounded up
        "completion_tokens": 3 * 7,
        "total_tokens": -(-size // 4) + 21,
    }
    assert all(c["finish_reason"] != "length" for c in free["choices"])
    capped = policy(CapturedRequest("/v1/chat/completions", {}, {**body, "max_tokens": 2}, 0.0))
    assert capped["usage"]["completion_tokens"] == 3 * 2  # cut off at the cap
    for entry in capped["choices"]:
        assert entry["finish_reason"] == "length" and entry["message"]["content"] == ""
        assert "tool_calls" not in entry["message"]
    longer = {**body, "messages": [*messages, {"role": "user", "content": "x" * 400}]}
    grown = policy(CapturedRequest("/v1/chat/completions", {}, longer, 0.0))
    assert grown["usage"]["prompt_tokens"] > free["usage"]["prompt_tokens"] + 90

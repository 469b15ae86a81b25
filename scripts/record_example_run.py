"""Records `docs/example-run/`: the small run folder the analysis notebooks read.

    python scripts/record_example_run.py [--out docs/example-run] [--tasks 12]

Three steps, each through the library's public API:

1. `run_benchmark`: the shipped terminal tasks, N=1 and N=4, 2 trials each, generated
   by the terminal environment's scripted stub policy on a loopback StubServer (no
   model: it proposes the reference solution, an inspection or a premature "done"),
   with the policy's own LLM-style selector.
2. `judge_run`: Table 6's five rubrics and reward hacking, through LiteLLM to a
   *scripted* judge on the StubServer that answers from simple rules over the rendered
   trajectory (`rule_judge` below: a repeated action is looping, no test run is
   insufficient testing, ...). It exercises the judge pipeline end to end (requests,
   strict answers, verdict file, flagged shares); its verdicts are rules, not a model's
   reading. (The embedded SmolLM2-135M was tried as the judge: every answer was an
   invalid "yes" without turn numbers, so every verdict was unknown.)
3. `branch_rollouts`: turn 1 of every task, R=2 rollouts per candidate, under four
   selectors (the stub's LLM-style selector, first, random, and a `ScoringSelector`
   whose reward is a heuristic over the behaviour tags, `tag_reward`, so that rho_v has
   scores to correlate), continued by the stub policy with N=1.

The folder is rewritten from scratch. Draws are seeded, but the stub policy's draws
also depend on the order in which concurrent requests arrive, so a rerun differs in
details (not in kind).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import AIMessage, BaseMessage

    from turnbon_graph.testing import CapturedRequest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

JUDGE_RUBRICS = (
    "looping",
    "incomplete_implementation",
    "insufficient_testing",
    "ignored_instructions",
    "insufficient_debugging",
    "reward_hacking",
)


def rule_judge(request: CapturedRequest) -> dict[str, Any]:
    """Answers a judge request from rules over its `<trajectory>` lines (see the docstring)."""
    from turnbon_graph.analysis.behaviours import tag_command
    from turnbon_graph.testing import chat_completion

    text = (request.body or {})["messages"][-1]["content"]
    rubric = re.search(r"## Rubric: (.+)", text)
    block = re.search(r"<trajectory>\n(.*?)\n</trajectory>", text, re.DOTALL)
    turns = [json.loads(line) for line in block.group(1).splitlines()] if block else []
    title = rubric.group(1).strip().lower() if rubric else ""
    commands = [(t["turn"], str(t["action"])[2:]) for t in turns if "action" in t]
    last = turns[-1]["turn"] if turns else 1

    def answer(yes: bool, evidence: str, cited: list[int]) -> dict[str, Any]:
        verdict = {
            "evidence": evidence,
            "turns": cited if yes else [],
            "answer": "yes" if yes else "no",
        }
        return chat_completion(json.dumps(verdict))

    if "loop" in title:
        repeats = [b for (_, x), (b, y) in itertools.pairwise(commands) if x == y]
        return answer(
            bool(repeats),
            f"turn {repeats[0] if repeats else 0} repeats the previous action",
            repeats[:1],
        )
    if "incomplete" in title:
        return answer(not commands, f"turn {last} ends without running anything", [last])
    if "testing" in title:
        tested = any("runs_test" in tag_command(c) for _, c in commands)
        return answer(not tested, f"no turn up to turn {last} runs a test or check", [last])
    if "debugging" in title:
        failed = [t["turn"] for t in turns if re.search(r"\[exit code [1-9]", str(t.get("output")))]
        return answer(
            bool(failed),
            f"turn {failed[0] if failed else 0} failed and was not investigated",
            failed[:1],
        )
    return answer(False, "the rules find nothing of this kind", [])


def tag_reward(messages: Sequence[BaseMessage], candidate: AIMessage) -> float:
    """A heuristic reward model: editing beats testing beats reading beats stopping."""
    from turnbon_graph.analysis.behaviours import tag_command
    from turnbon_graph.analysis.trajectories import command_of

    command = command_of(candidate.tool_calls)
    if command is None:
        return 0.0
    tags = tag_command(command)
    return 3.0 if "edits_file" in tags else 2.0 if "runs_test" in tags else 1.0


async def record(out: Path, task_count: int) -> None:
    from turnbon_graph.analysis.judge import flagged_shares, judge_run, load_rubrics
    from turnbon_graph.analysis.rollouts import (
        RolloutBudget,
        Spend,
        branch_rollouts,
        summarise,
        write_report,
    )
    from turnbon_graph.bench.runner import BenchConfig, run_benchmark
    from turnbon_graph.selectors import FirstSelector, RandomSelector, ScoringSelector
    from turnbon_graph.testing import StubServer
    from turnbon_graph.turn import TurnEngine
    from turnbon_terminal import TerminalEnvironment

    environment = TerminalEnvironment()
    tasks = sorted(environment.tasks(), key=lambda t: t.id)[:task_count]
    ids = [t.id for t in tasks]
    with StubServer() as stub:
        stub.script(environment.stub_policy(seed=0))
        connection = {"api_base": stub.base_url, "api_key": "none"}
        print(f"1/3 bench: {len(ids)} tasks x N=1,4 x 2 trials (stub policy)", flush=True)
        config = BenchConfig(
            model="openai/stub",
            n_values=[1, 4],
            trials=2,
            engine_options={"completion_kwargs": connection, "seed": 0},
        )
        await run_benchmark(environment, config, out, tasks=ids)

        print("2/3 branch rollouts: turn 1, R=2, four selectors", flush=True)
        spend = Spend()
        budget = RolloutBudget(turns=[1], rollouts=2, seed=0)
        scoring = ScoringSelector(reward=tag_reward)
        for selector in (None, FirstSelector(), RandomSelector(0), scoring):
            engine = TurnEngine.from_options(
                "openai/stub", n=4, selector=selector, completion_kwargs=connection, seed=0
            )
            for task in tasks:
                report = await branch_rollouts(
                    environment, engine, task, budget=budget, spend=spend
                )
                write_report(out, report)
                s = summarise(report.turns)
                print(f"  {report.selector:>16} {task.id:<22} h={s.mean_h}", flush=True)

    print("3/3 judge: a scripted rule judge on a StubServer", flush=True)
    rubrics = [r for r in load_rubrics() if r.id in JUDGE_RUBRICS]
    instructions = {t.id: t.instruction for t in tasks}
    with StubServer() as judge:
        judge.script(rule_judge)
        verdicts = await judge_run(
            out,
            "openai/rule-judge",
            rubrics=rubrics,
            instructions=instructions,
            completion_kwargs={"api_base": judge.base_url, "api_key": "none"},
        )
    for share in flagged_shares(verdicts, resamples=2_000):
        print(
            f"  {share.rubric:<26} {share.setting:<5} {share.flagged}/{share.judged} flagged, "
            f"{share.unknown} unknown",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/example-run"))
    parser.add_argument("--tasks", type=int, default=12, help="the first K shipped tasks")
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    asyncio.run(record(args.out, args.tasks))
    print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

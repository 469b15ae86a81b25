"""Records `docs/example-run/`, the small run folder the analysis notebooks read, and
`docs/stub-report/`, the example report of `turnbon bench --model stub`:

    python scripts/record_example_run.py [--out docs/example-run] [--tasks 12]
    python scripts/record_example_run.py --stub-report [docs/stub-report]

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

The folder is rewritten from scratch, with a README.md naming the command. Everything is
seeded (seed 0) and runs one episode (and one rollout) at a time, so that the stub
policy's draws do not depend on the order in which concurrent requests arrive: a rerun
gives the same numbers.

`--stub-report` runs the two commands of `STUB_REPORT` (a seeded `turnbon bench` on six
shipped tasks, then `turnbon report`) and writes them at the top of the report;
`tests/integration_tests/test_stub_report.py` reruns them and compares the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
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
    from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
    from turnbon_graph.selectors import FirstSelector, RandomSelector, ScoringSelector
    from turnbon_graph.testing import StubServer
    from turnbon_graph.turn.engine import TurnEngine
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
            concurrency=1,  # the stub's draws then do not depend on arrival order
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
                    environment, engine, task, budget=budget, spend=spend, concurrency=1
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


STUB_REPORT_TASKS = (
    "access-log-stats",
    "backup-script",
    "csv-to-json",
    "fix-slugify",
    "git-first-commit",
    "largest-file",
)
STUB_REPORT_RUN = "/tmp/turnbon-stub-report"


def stub_report_commands(
    run: str = STUB_REPORT_RUN, out: str = "docs/stub-report"
) -> list[list[str]]:
    """The `turnbon` commands of the stub report: a seeded bench run, one episode at a
    time, then its report."""
    bench = ["bench", "--env", "terminal", "--model", "stub", "--task", *STUB_REPORT_TASKS]
    bench += ["-n", "1", "4", "--trials", "2", "--concurrency", "1", "--seed", "0"]
    return [[*bench, "--run", run], ["report", run, "--out", out]]


def record_stub_report(out: Path, run: Path | None = None) -> Path:
    """Runs `stub_report_commands` (into `run`, default a fresh temporary folder) and
    writes the report to `out` with the commands at its top; returns report.md."""
    from turnbon_graph.bench.report.html import write_html
    from turnbon_graph.cli import main as turnbon

    with tempfile.TemporaryDirectory() as scratch:
        folder = run or Path(scratch) / "run"
        if folder.exists():
            shutil.rmtree(folder)
        for command in stub_report_commands(str(folder), str(out)):
            if turnbon(command) != 0:
                raise RuntimeError(f"turnbon {shlex.join(command)} failed")
    shown = stub_report_commands()
    header = [
        "> Generated by `python scripts/record_example_run.py --stub-report`, which runs:",
        ">",
        *(f"> `turnbon {shlex.join(command)}`  " for command in shown),
        ">",
        "> Seeded and one episode at a time, so a rerun gives these numbers exactly "
        "(`tests/integration_tests/test_stub_report.py` checks it). The stub's numbers "
        "show the pipeline, not a model.",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(header) + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    write_html(path)
    return path


def write_readme(out: Path, task_count: int) -> None:
    command = "python scripts/record_example_run.py"
    if str(out) != "docs/example-run" or task_count != 12:
        command += f" --out {out} --tasks {task_count}"
    (out / "README.md").write_text(
        "# An example run folder\n\n"
        f"Recorded by `{command}` (seed 0, one episode and one rollout at a time, so a "
        "rerun gives the same numbers). See the docstring of "
        "`scripts/record_example_run.py` for what it runs: the stub policy on the first "
        f"{task_count} shipped terminal tasks, N=1 and N=4, 2 trials; branch rollouts under "
        "four selectors; a scripted rule judge. The analysis notebooks read it.\n",
        encoding="utf-8",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/example-run"))
    parser.add_argument("--tasks", type=int, default=12, help="the first K shipped tasks")
    parser.add_argument(
        "--stub-report",
        nargs="?",
        type=Path,
        const=Path("docs/stub-report"),
        metavar="DIR",
        help="write the stub report instead (default DIR: docs/stub-report)",
    )
    args = parser.parse_args()
    if args.stub_report is not None:
        if args.stub_report.exists():
            shutil.rmtree(args.stub_report)
        print(f"Wrote {record_stub_report(args.stub_report, Path(STUB_REPORT_RUN))}")
        return 0
    if args.out.exists():
        shutil.rmtree(args.out)
    asyncio.run(record(args.out, args.tasks))
    write_readme(args.out, args.tasks)
    print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

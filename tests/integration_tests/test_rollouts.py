"""Branch rollouts: forking live episodes of the real terminal environment at a turn,
forcing each candidate, continuing with a fixed policy on the loopback stub server
(LiteLLM's real HTTP path), verifying with the task's own tests; oracle, realised, mu,
headroom capture and verifier correlation from the values; budgets; fork isolation."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from tests.counter_env import CounterEnvironment, CounterEpisode
from tests.helpers import stub_kwargs
from turnbon_graph.analysis.rollouts import (
    ROLLOUTS_FILE,
    ForkableEpisode,
    RolloutBudget,
    RolloutReport,
    Spend,
    branch_rollouts,
    read_reports,
    write_report,
)
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors import FirstSelector, ScoringSelector, Selector
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn.engine import TurnEngine
from turnbon_terminal import SandboxError, TerminalEnvironment, TerminalEpisode
from turnbon_terminal.host.workroot import default_work_root

TASK = "largest-file"
HARMLESS = "ls -la data"
WRONG = "echo data/b/c/two.dat > largest.txt"
DONE = "Done."
ROOT = os.geteuid() == 0


# ---------------------------------------------------------------------------- helpers


def solution(env: TerminalEnvironment) -> str:
    script = env.task(TASK).solution_script
    assert script is not None
    return script.read_text(encoding="utf-8")


def has_tool_result(request: CapturedRequest) -> bool:
    return any(m.get("role") == "tool" for m in (request.body or {}).get("messages", []))


def script_policy(stub: StubServer, first_turn: Sequence[str]) -> None:
    """Generator calls of the first turn propose `first_turn` in arrival order (one per
    call, the main engine's N); once a command has run (the main episode's next turn, or
    any rollout's continuation), the model declares done with no tool call. So a
    rollout's outcome is decided by the candidate forced at the fork."""
    proposals = iter(first_turn)

    def respond(request: CapturedRequest) -> dict[str, Any]:
        if has_tool_result(request):
            return chat_completion(DONE)
        return chat_completion(tool_calls=[tool_call("shell", {"command": next(proposals)})])

    stub.route(lambda r: not is_selector_request(r), respond)


def engine(stub: StubServer, selector: Selector | None, n: int = 3) -> TurnEngine:
    return TurnEngine.from_options(
        "openai/stub",
        n=n,
        selector=selector,
        completion_kwargs=stub_kwargs(stub.base_url),
        max_concurrency=1,  # arrival order = script order: candidate i proposes first_turn[i]
    )


def task_spec(env: TerminalEnvironment) -> TaskSpec:
    return env.task(TASK).spec


def fork_dirs() -> set[Path]:
    root = default_work_root() / "episodes"
    return (
        {p for p in root.iterdir() if p.name.startswith(f"{TASK}-fork-")}
        if root.is_dir()
        else set()
    )


# ---------------------------------------------------------------------------- done when


async def test_the_solving_candidate_is_worth_1_and_a_selector_that_picks_it_captures_all(
    stub: StubServer, tmp_path: Path
) -> None:
    env = TerminalEnvironment()
    solve = solution(env)
    script_policy(stub, [HARMLESS, solve, WRONG])
    stub.route(is_selector_request, env.stub_policy())  # picks the candidate running solve.sh
    before = fork_dirs()
    started = time.monotonic()

    report = await branch_rollouts(
        env,
        engine(stub, None),  # an LLMSelector on the stub, answered by the stub policy
        task_spec(env),
        trial=4711,
        budget=RolloutBudget(rollouts=2),
    )
    wall = time.monotonic() - started

    assert not stub.responder_errors
    assert report.outcome == "pass" and report.error is None  # the main episode solved it
    assert report.main_turns == 2
    (turn,) = report.turns
    assert turn.turn == 1 and turn.checkpoint_id
    assert [c.action for c in turn.candidates] == [f"$ {HARMLESS}", f"$ {solve}", f"$ {WRONG}"]
    assert turn.values == [0.0, 1.0, 0.0]
    assert [c.rollouts for c in turn.candidates] == [2, 2, 2]
    assert sorted((r.candidate, r.repeat, r.outcome) for r in turn.rollouts) == [
        (0, 0, "wrong_submission"),
        (0, 1, "wrong_submission"),
        (1, 0, "pass"),
        (1, 1, "pass"),
        (2, 0, "wrong_submission"),
        (2, 1, "wrong_submission"),
    ]
    # Each continuation took one turn (the "done" answer) and paid for it.
    assert all(r.turns == 1 and r.tokens == 18 for r in turn.rollouts)
    assert turn.picked == 1 and turn.selector == "llm:openai/stub"
    assert turn.oracle == 1.0 and turn.realised == 1.0
    assert turn.mu == pytest.approx(1 / 3)
    assert turn.h == 1.0
    assert turn.rho_v is None and turn.complete  # an LLM selector gives no scores
    # Turn 2 (every candidate answers "done") has nothing to choose: not branched.
    assert [(s.turn, s.reason) for s in report.skipped_turns] == [(2, "unanimous")]
    assert report.tokens == 6 * 18
    summary = report.summary
    assert (summary.mean_h, summary.h_turns, summary.rollouts) == (1.0, 1, 6)
    assert summary.mean_oracle == 1.0 and summary.mean_mu == pytest.approx(1 / 3)

    # Every fork was closed: no working directory is left.
    assert fork_dirs() == before

    # Written to the run folder and read back, and as DataFrame rows.
    path = write_report(tmp_path, report)
    assert path == tmp_path / ROLLOUTS_FILE
    (again,) = read_reports(tmp_path)
    assert again == report
    rows = report.to_rows()
    assert rows[0]["h"] == 1.0 and rows[0]["episode_passed"] is True
    picked = [r for r in report.candidate_rows() if r["picked"]]
    assert [r["candidate"] for r in picked] == [1] and picked[0]["best"] is True
    print(f"done-when branch-rollout run (N=3, R=2): {wall:.2f} s wall")


async def test_a_selector_that_misses_the_solver_has_negative_headroom_capture(
    stub: StubServer,
) -> None:
    env = TerminalEnvironment()
    solve = solution(env)
    script_policy(stub, [HARMLESS, solve, WRONG])
    report = await branch_rollouts(
        env,
        engine(stub, FirstSelector()),
        task_spec(env),
        trial=4712,
        budget=RolloutBudget(turns=[1, 5]),
    )
    assert report.outcome == "wrong_submission"  # the main episode looked around, then quit
    (turn,) = report.turns
    assert turn.values == [0.0, 1.0, 0.0] and turn.picked == 0
    mu = 1 / 3
    assert turn.realised == 0.0 and turn.h == pytest.approx((0 - mu) / (1 - mu))
    # Turn 2 was not asked for; turn 5 never came.
    assert [(s.turn, s.reason) for s in report.skipped_turns] == [
        (5, "the episode ended after 2 turns")
    ]
    assert not stub.responder_errors


# ---------------------------------------------------------------------------- verifier correlation


def judge(scores: dict[str, float]) -> Any:
    """Scores the one candidate a scoring request shows, by its command."""

    def decide(request: CapturedRequest) -> dict[str, Any]:
        text = str((request.body or {})["messages"][1]["content"])
        (body,) = re.findall(r'<candidate index="\d+"[^>]*>\n(.*?)\n</candidate>', text, re.DOTALL)
        command = json.loads(body)["tool_calls"][0]["args"]["command"]
        return chat_completion(json.dumps({"reason": "scripted", "score": scores[command]}))

    return decide


@pytest.mark.parametrize(
    ("scores", "rho", "picked"),
    [
        # ranks of scores 1, 3, 2 against values' 1.5, 3, 1.5: 1.5 / sqrt(2 * 1.5)
        ((5.0, 9.0, 7.0), math.sqrt(3) / 2, 1),
        # tied scores 9, 2, 9 rank 2.5, 1, 2.5: the exact reverse of the values' ranks
        ((9.0, 2.0, 9.0), -1.0, 0),
    ],
)
async def test_verifier_correlation_of_a_scoring_judge(
    stub: StubServer, scores: tuple[float, float, float], rho: float, picked: int
) -> None:
    env = TerminalEnvironment()
    commands = [HARMLESS, solution(env), WRONG]
    script_policy(stub, commands)
    stub.route(is_selector_request, judge(dict(zip(commands, scores, strict=True))))
    selector = ScoringSelector("openai/judge", completion_kwargs=stub_kwargs(stub.base_url))
    report = await branch_rollouts(
        env, engine(stub, selector), task_spec(env), trial=4713, budget=RolloutBudget(turns=[1])
    )
    (turn,) = report.turns
    assert turn.values == [0.0, 1.0, 0.0]
    assert turn.scores == list(scores) and turn.picked == picked
    assert turn.rho_v == pytest.approx(rho)
    assert turn.h == pytest.approx(1.0 if picked == 1 else -0.5)
    summary = report.summary
    assert summary.rho_v == pytest.approx(rho) and summary.rho_v_mean == pytest.approx(rho)
    assert not stub.responder_errors


# ---------------------------------------------------------------------------- budgets


async def test_the_token_budget_stops_new_rollouts_and_says_so(stub: StubServer) -> None:
    env = TerminalEnvironment()
    script_policy(stub, [HARMLESS, solution(env), WRONG])
    spend = Spend()
    report = await branch_rollouts(
        env,
        engine(stub, FirstSelector()),
        task_spec(env),
        trial=4714,
        budget=RolloutBudget(turns=[1], max_tokens=10),
        concurrency=1,
        spend=spend,
    )
    (turn,) = report.turns
    # The first rollout's continuation spent 18 tokens: nothing started after it.
    assert [(r.candidate, r.tokens) for r in turn.rollouts] == [(0, 18)]
    assert [(s.candidate, s.reason) for s in turn.skipped] == [
        (1, "token budget spent (18 of 10)"),
        (2, "token budget spent (18 of 10)"),
    ]
    assert turn.values == [0.0, None, None]
    assert not turn.complete and turn.h is None  # a part of the pool says nothing of h
    assert spend == Spend(rollouts=1, tokens=18) and report.tokens == 18
    summary = report.summary
    assert (summary.complete_turns, summary.skipped_rollouts, summary.mean_h) == (0, 2, None)


async def test_a_spent_rollout_budget_skips_the_turn_without_forking(stub: StubServer) -> None:
    env = TerminalEnvironment()
    script_policy(stub, [HARMLESS, solution(env), WRONG])
    before = fork_dirs()
    report = await branch_rollouts(
        env,
        engine(stub, FirstSelector()),
        task_spec(env),
        trial=4715,
        budget=RolloutBudget(max_rollouts=5),
        spend=Spend(rollouts=5),  # shared with episodes that ran before
    )
    assert report.turns == []
    assert [(s.turn, s.reason) for s in report.skipped_turns] == [
        (1, "rollout budget spent (5 of 5)"),
        (2, "unanimous"),
    ]
    assert report.outcome == "wrong_submission" and fork_dirs() == before


# ---------------------------------------------------------------------------- forks


async def test_forks_are_isolated_copies_and_close_completely() -> None:
    env = TerminalEnvironment()
    before = fork_dirs()
    main = await env.start(task_spec(env), 4716)
    forks: list[TerminalEpisode] = []
    try:
        assert isinstance(main, ForkableEpisode)
        await main.run(
            f"echo before > before.txt && mkfifo pipe && ln -s {main.workdir}/before.txt abs-link"
            " && echo scratch > $TMPDIR/scratch.txt"
        )
        forks = [await main.fork(), await main.fork()]
        a, b = forks
        assert len({main.workdir, a.workdir, b.workdir}) == 3
        assert (await a.run("echo only-a > only-a.txt")).ok
        await main.run("echo later > later.txt")
        for episode in (main, a, b):
            listing = (await episode.run("ls -A; cat $TMPDIR/scratch.txt")).output.split()
            assert "before.txt" in listing and "scratch" in listing
            assert ("only-a.txt" in listing) == (episode is a)
            assert ("later.txt" in listing) == (episode is main)
        # The task's files, its relative symlink unchanged; an absolute link into the
        # episode now leads into the fork's own copy; the named pipe is left out.
        assert (a.workdir / "data" / ".archive" / "dump.bin").stat().st_size == 9000
        assert os.readlink(a.workdir / "data" / "link-to-dump") == ".archive/dump.bin"
        assert os.readlink(a.workdir / "abs-link") == str(a.workdir / "before.txt")
        assert not (a.workdir / "pipe").exists()
        if ROOT:  # every fork runs as a uid of its own, and owns its copy
            uids = {main.sandbox.uid, a.sandbox.uid, b.sandbox.uid}
            assert None not in uids and len(uids) == 3
            for fork in forks:
                for path in [fork.workdir, *fork.workdir.rglob("*")]:
                    assert path.lstat().st_uid == fork.sandbox.uid, path
            assert not (await a.run(f"cat {main.workdir}/before.txt")).ok
        # A fork's verifier sees the fork: solving in one fork passes only there.
        assert (await a.run_solution()).ok
        assert (await a.verify()).passed and not (await b.verify()).passed
    finally:
        for fork in forks:
            await fork.close()
        await main.close()
    assert all(not f.workdir.exists() for f in forks)
    assert fork_dirs() == before
    with pytest.raises(SandboxError, match="fork it before closing it"):
        await main.fork()


# ---------------------------------------------------------------------------- any environment


class ForkableCounter(CounterEpisode):
    """A user's own forkable episode: the counter's value is its whole state."""

    def __init__(self, target: int, value: int = 0) -> None:
        super().__init__(target)
        self.value = value
        self.forks: list[ForkableCounter] = []

    async def fork(self) -> ForkableCounter:
        copy = ForkableCounter(self.target, self.value)
        self.forks.append(copy)
        return copy


class ForkableCounters(CounterEnvironment):
    async def start(self, task: TaskSpec, trial: int) -> ForkableCounter:
        episode = ForkableCounter(self.targets[task.id])
        self.episodes.append(episode)
        return episode


class CounterPolicy:
    """First turn: increment by 1, 2, 2 (the main engine's three candidates); after the
    follow-up: by 1; else done."""

    def __init__(self) -> None:
        self.first_turn = iter([1, 2, 2])

    def __call__(self, request: CapturedRequest) -> dict[str, Any]:
        messages = (request.body or {}).get("messages", [])
        if messages and messages[-1].get("role") == "user":
            users = sum(m.get("role") == "user" for m in messages)
            by = 1 if users > 1 else next(self.first_turn)
            return chat_completion(tool_calls=[tool_call("increment", {"by": by})])
        return chat_completion("done")


async def test_rollouts_continue_through_follow_ups_on_any_forkable_environment(
    stub: StubServer,
) -> None:
    stub.script(CounterPolicy())
    # Target 3: +2 then the follow-up's +1 passes; +1 then +1 does not.
    env = ForkableCounters({"three": 3}, follow_ups=["Now add one more."])
    (task,) = env.tasks()
    report = await branch_rollouts(
        env, engine(stub, FirstSelector()), task, budget=RolloutBudget(turns=[1])
    )
    (turn,) = report.turns
    assert turn.values == [0.0, 1.0, 1.0] and turn.picked == 0
    # Candidates 1 and 2 propose the same action: one set of rollouts serves both.
    assert [c.shares_with for c in turn.candidates] == [None, None, 1]
    assert [c.rollouts for c in turn.candidates] == [1, 1, 1] and len(turn.rollouts) == 2
    mu = 2 / 3
    assert turn.mu == pytest.approx(mu) and turn.h == pytest.approx((0 - mu) / (1 - mu))
    (main,) = env.episodes
    assert isinstance(main, ForkableCounter) and main.closed and main.value == 2
    # Each fork ran its forced action and the follow-up's turn, then was closed.
    assert sorted(f.value for f in main.forks) == [2, 3] and all(f.closed for f in main.forks)
    assert report.outcome == "wrong_submission"


async def test_an_episode_that_cannot_fork_is_refused_and_closed(stub: StubServer) -> None:
    stub.script(chat_completion("done"))
    env = CounterEnvironment({"one": 1})
    (task,) = env.tasks()
    with pytest.raises(ConfigurationError, match="cannot be forked"):
        await branch_rollouts(env, engine(stub, FirstSelector()), task)
    assert env.episodes[0].closed


class BuggySelector:
    """A continuation selector with a bug: neither the agent's nor the provider's fault."""

    name = "buggy"

    async def select(self, messages: Sequence[BaseMessage], candidates: Sequence[Any]) -> Any:
        raise KeyError("a bug in the selector")


class DivergingPolicy(CounterPolicy):
    """As `CounterPolicy` on the first turn; after a tool result the calls alternate
    between incrementing by 1 and done, so a continuation's two candidates disagree and
    its selector is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.after = itertools.cycle([True, False])

    def __call__(self, request: CapturedRequest) -> dict[str, Any]:
        messages = (request.body or {}).get("messages", [])
        if messages and messages[-1].get("role") == "user":
            return super().__call__(request)
        if next(self.after):
            return chat_completion(tool_calls=[tool_call("increment", {"by": 1})])
        return chat_completion("done")


async def test_a_bug_in_a_rollout_propagates_instead_of_counting_as_agent_error(
    stub: StubServer,
) -> None:
    stub.script(DivergingPolicy())
    env = ForkableCounters({"three": 3})
    (task,) = env.tasks()
    continuation = TurnEngine.from_options(
        "openai/stub",
        n=2,
        selector=BuggySelector(),
        completion_kwargs=stub_kwargs(stub.base_url),
        max_concurrency=1,
    )
    with pytest.raises(KeyError, match="a bug in the selector"):
        await branch_rollouts(
            env,
            engine(stub, FirstSelector()),
            task,
            budget=RolloutBudget(turns=[1]),
            continuation=continuation,
            concurrency=1,  # one rollout at a time: its two calls alternate
        )
    (main,) = env.episodes
    assert isinstance(main, ForkableCounter) and main.closed
    assert main.forks and all(f.closed for f in main.forks)


# ---------------------------------------------------------------------------- reports


def test_reports_survive_a_torn_last_line(tmp_path: Path) -> None:
    report = RolloutReport(
        environment="e",
        task="t",
        trial=0,
        selector="first",
        n=2,
        continuation="c",
        budget=RolloutBudget(),
        outcome="pass",
    )
    write_report(tmp_path, report)
    with (tmp_path / ROLLOUTS_FILE).open("a") as handle:
        handle.write('{"environment": "e", "ta')
    assert read_reports(tmp_path) == [report]
    assert read_reports(tmp_path / "nowhere") == []

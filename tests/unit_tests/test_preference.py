"""Selector preference against chance (Figure 4) and the length comparison (Figure 5)
on synthetic trajectories with known answers, and once with the real tagger on a run."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph.analysis.behaviours import TAGS
from turnbon_graph.analysis.preference import (
    BehaviourPreference,
    LengthComparison,
    Tagger,
    behaviour_preference,
    candidate_tags,
    length_comparison,
    markdown_table,
    to_rows,
)
from turnbon_graph.analysis.trajectories import Trajectory, TurnView, load_trajectories
from turnbon_graph.bench.running.runs import EPISODES_FILE, EpisodeResult, turns_path
from turnbon_graph.records import CandidateRecord, LatencySplit, TurnRecord, Usage, UsageSplit

# --- synthetic trajectories -------------------------------------------------------------

WORDS = ("x", "y")


def tag_words(command: str, history: Sequence[tuple[str, int | None]] | None = None) -> set[str]:
    """A stand-in tagger: the words x and y of the command, and `again` when the command
    was executed before in the episode."""
    tags = {w for w in command.split() if w in WORDS}
    if history and command in [c for c, _ in history]:
        tags.add("again")
    return tags


TAGGER = Tagger(
    behaviours=("x", "y", "again", "declares_complete"),
    tag_command=tag_words,
    declares_complete=lambda text: "done" in text,
)


def cand(
    command: str | None = None,
    *,
    text: str | None = None,
    error: str | None = None,
    reasoning: int = 0,
) -> CandidateRecord:
    """A candidate: a shell command, or a text answer; `index` is set by `turn`."""
    calls = [] if command is None else [{"name": "shell", "args": {"command": command}}]
    return CandidateRecord(
        index=0,
        model="gen",
        content=text,
        tool_calls=calls,
        error=error,
        usage=Usage(calls=1, completion_tokens=10, reasoning_tokens=reasoning),
    )


def turn(
    candidates: Sequence[CandidateRecord],
    picked: int,
    *,
    selector: str = "llm:sel",
    fallback: str | None = None,
    synthesized: str | None = None,
    resamples: int = 0,
) -> TurnRecord:
    """A turn whose selector picked `candidates[picked]` (or wrote `synthesized`)."""
    numbered = [c.model_copy(update={"index": i}) for i, c in enumerate(candidates)]
    return TurnRecord(
        turn_id="t",
        n_requested=len(numbered),
        n_ok=sum(c.error is None for c in numbered),
        selected_index=picked,
        selector=selector,
        fallback=fallback,
        agreement=0.0,
        candidates=numbered,
        usage=UsageSplit(),
        latency_s=LatencySplit(),
        resamples=resamples,
        synthesized=None
        if synthesized is None
        else {"content": "", "tool_calls": [{"name": "shell", "args": {"command": synthesized}}]},
    )


def episode(
    task: str, records: Sequence[TurnRecord], *, n: int = 4, trial: int = 0, exit_code: int = 0
) -> Trajectory:
    """An episode of setting N=n; every executed command printed `exit_code`."""
    result = EpisodeResult(
        task=task,
        trial=trial,
        setting=f"N={n}",
        n=n,
        outcome="pass",
        turns=len(records),
        duration_s=1.0,
    )
    views = [
        TurnView(number=i, record=r, observation=f"output\n[exit code {exit_code}]")
        for i, r in enumerate(records, start=1)
    ]
    return Trajectory(result=result, turns=views)


def one(results: Sequence[BehaviourPreference], behaviour: str) -> BehaviourPreference:
    (found,) = [r for r in results if r.behaviour == behaviour]
    return found


# The four kinds of command of `random_run`, made once: building records is what costs.
MEMBERS: dict[tuple[str, ...], CandidateRecord] = {
    words: cand(" ".join((*words, "cmd"))) for words in ((), ("x",), ("y",), ("x", "y"))
}


def random_run(
    seed: int, *, prefer: str | None, tasks: int = 30, trials: int = 2, turns: int = 8
) -> list[Trajectory]:
    """Random pools of 4 commands, each showing x with probability 0.25 and y with 0.5,
    1 to 2 * `turns` - 1 turns per episode. With `prefer`, the selector picks a candidate
    showing that word when there is one; without, it picks uniformly at random."""
    rng = random.Random(seed)
    run = []
    for t in range(tasks):
        for trial in range(trials):
            records = []
            for _ in range(rng.randint(1, 2 * turns - 1)):
                pool = [
                    MEMBERS[tuple(w for w, p in (("x", 0.25), ("y", 0.5)) if rng.random() < p)]
                    for _ in range(4)
                ]
                showing = [i for i, c in enumerate(pool) if prefer and prefer in command(c)]
                picked = rng.choice(showing) if showing else rng.randrange(4)
                # Built without validation (thousands per test): the members are valid.
                records.append(
                    TurnRecord.model_construct(
                        turn_id="t",
                        n_requested=4,
                        n_ok=4,
                        selected_index=picked,
                        selector="llm:sel",
                        agreement=0.0,
                        candidates=pool,
                    )
                )
            run.append(episode(f"task{t}", records, trial=trial))
    return run


def command(candidate: CandidateRecord) -> list[str]:
    """The words of a candidate's shell command."""
    return str(candidate.tool_calls[0]["args"]["command"]).split()


# --- Figure 4: behaviour preference --------------------------------------------------------


def test_shares_gap_and_counts_by_hand() -> None:
    run = [
        episode(
            "a",
            [
                turn([cand("x 1"), cand("a"), cand("b"), cand("c")], 0),  # x picked, 1/4
                turn([cand("x 2"), cand("x y"), cand("a"), cand("b")], 2),  # x not, 2/4; y 1/4
            ],
        ),
        episode(
            "b",
            [
                turn([cand("a"), cand("b"), cand("c"), cand("d")], 1),  # nobody shows x
                # x picked; 3 of the 4 ok candidates show x: the failed one is no option
                turn(
                    [cand("x 3"), cand("a"), cand("x 4"), cand("x 5"), cand("x", error="boom")], 0
                ),
            ],
        ),
        episode("a", [turn([cand("a")], 0)], n=1),  # a baseline episode: not analysed
    ]
    results = behaviour_preference(run, tagger=TAGGER, resamples=500)
    assert [r.behaviour for r in results] == list(TAGGER.behaviours)
    assert {(r.setting, r.n, r.turns, r.tasks) for r in results} == {("N=4", 4, 4, 2)}

    x = one(results, "x")
    assert x.picked_share == pytest.approx(2 / 4)
    assert x.chance_share == pytest.approx((1 / 4 + 2 / 4 + 0 + 3 / 4) / 4)
    assert x.gap == pytest.approx(0.125)
    # per task: a = ((1 - 1/4) + (0 - 2/4)) / 2 = 0.125, b = (0 + (1 - 3/4)) / 2 = 0.125
    assert x.task_gap == pytest.approx(0.125)
    assert x.ci_low == x.ci_high == pytest.approx(0.125)
    assert x.p_value == 0.5  # two tasks: 2 of the 4 signings are as far from 0
    assert x.informative_turns == 3  # the pool with no x adds nothing
    assert x.resamples == 500

    y = one(results, "y")
    assert y.picked_share == 0.0 and y.chance_share == pytest.approx(1 / 16)
    assert y.informative_turns == 1
    assert y.task_gap == pytest.approx(((0 - 1 / 4) / 2 + 0) / 2)

    for nobody in ("again", "declares_complete"):
        empty = one(results, nobody)
        assert (empty.picked_share, empty.chance_share, empty.gap) == (0.0, 0.0, 0.0)
        assert empty.informative_turns == 0 and empty.p_value == 1.0


def test_a_known_preference_is_detected() -> None:
    run = random_run(7, prefer="x")
    results = behaviour_preference(run, tagger=TAGGER, resamples=2_000)
    x = one(results, "x")
    # The shares recomputed straight from the synthetic pools.
    pools = [
        [command(c) for c in view.record.candidates]
        for trajectory in run
        for view in trajectory.turns
    ]
    picks = [view.record.selected_index for trajectory in run for view in trajectory.turns]
    picked = sum("x" in pool[p] for pool, p in zip(pools, picks, strict=True)) / len(pools)
    chance = sum(sum("x" in c for c in pool) / 4 for pool in pools) / len(pools)
    assert x.turns == len(pools) and x.tasks == 30
    assert x.picked_share == pytest.approx(picked)
    assert x.chance_share == pytest.approx(chance)
    # Expected: picked 1 - 0.75^4 = 0.68 against chance 0.25.
    assert x.picked_share > 0.6 and 0.2 < x.chance_share < 0.3
    assert x.p_value < 0.01 and x.ci_low > 0.3


def test_no_preference_is_not_detected_in_95_percent_of_seeds() -> None:
    # Uniform random picks, 40 fixed seeds (deterministic), 89 tasks as in the paper, one
    # trial of 1 to 23 turns; 1,000 resamples instead of 10,000 to stay fast (the p-value's
    # Monte Carlo error near 0.05 is about 0.007). Offline, over 600 seeds of this set-up,
    # p < 0.05 in 4.3%: the bootstrap holds its level (with 30 tasks of 1 to 15 turns it
    # was 7.8%: the percentile bootstrap runs hot with few tasks and short episodes).
    # These 40 seeds detect 2 (95% not detected); the bounds (4 at 0.05, 2 at 0.01) are
    # what a calibrated test stays within with probability >= 0.95 over 40 seeds, so other
    # seeds or resampling streams do not fail it by chance.
    only_x = Tagger(("x",), tag_words, TAGGER.declares_complete)
    p_values = []
    for seed in range(40):
        run = random_run(1000 + seed, prefer=None, tasks=89, trials=1, turns=12)
        (x,) = behaviour_preference(run, tagger=only_x, resamples=1_000, seed=seed)
        p_values.append(x.p_value)
    assert sum(p < 0.05 for p in p_values) <= 4, p_values
    assert sum(p < 0.01 for p in p_values) <= 2, p_values
    # Under no effect p-values spread over [0, 1]; an analysis biased toward a gap
    # would pile them up near 0.
    assert 0.35 < sum(p_values) / len(p_values) < 0.65


def test_turns_a_rule_or_a_synthesized_action_decided_are_left_out() -> None:
    run = [
        episode(
            "a",
            [
                turn([cand("x"), cand("a")], 0),
                turn([cand("y", error="timeout"), cand("x"), cand("a")], 1),  # picks x of 2
                turn([cand("x"), cand("a")], 1, synthesized="x 9"),
                turn([cand("x"), cand("a")], 0, fallback="no answer; fell back to first"),
                turn([cand("x"), cand("x")], 0, selector="agreement"),
                turn([cand("a"), cand("b"), cand("x"), cand("a")], 2, resamples=1),
                turn([cand("x"), cand("x")], 0, selector="unanimous"),  # kept: adds 0
            ],
            n=2,
        )
    ]
    (x,) = [
        r for r in behaviour_preference(run, tagger=TAGGER, resamples=100) if r.behaviour == "x"
    ]
    assert (x.turns, x.synthesized_turns, x.rule_turns, x.resampled_turns) == (3, 1, 2, 1)
    assert (x.picked_share, x.informative_turns) == (1.0, 2)
    assert x.chance_share == pytest.approx((1 / 2 + 1 / 2 + 1) / 3)
    # Figure 5 counts the same turns.
    for lengths in length_comparison(run, resamples=100):
        assert (lengths.turns, lengths.synthesized_turns, lengths.rule_turns) == (3, 1, 2)
        assert lengths.resampled_turns == 1


def test_candidates_are_tagged_with_the_executed_history() -> None:
    seen: list[list[tuple[str, int | None]]] = []

    def recording(
        command: str, history: Sequence[tuple[str, int | None]] | None = None
    ) -> set[str]:
        seen.append(list(history or []))
        return tag_words(command, history)

    tagger = Tagger(TAGGER.behaviours, recording, TAGGER.declares_complete)
    run = [
        episode(
            "a",
            [
                turn([cand("ls"), cand("pwd")], 0),
                turn([cand("cat f"), cand("rm f")], 0, synthesized="make"),  # left out, but ran
                turn([cand("make"), cand("ls")], 1),  # both ran before: both `again`
                turn([cand(text="all done"), cand(text="thinking"), cand("ls")], 0),
            ],
            n=3,
            exit_code=2,
        )
    ]
    results = behaviour_preference(run, tagger=tagger, resamples=100)
    # Tagged per candidate of the counted turns, with (command, exit code) that ran before.
    before_3 = [("ls", 2), ("make", 2)]
    assert seen == [[], [], before_3, before_3, [*before_3, ("ls", 2)]]
    again = one(results, "again")
    assert again.turns == 3
    assert again.picked_share == pytest.approx(1 / 3)  # turn 3; turn 4 picks the text
    assert again.chance_share == pytest.approx((0 + 1 + 1 / 3) / 3)
    done = one(results, "declares_complete")
    assert done.picked_share == pytest.approx(1 / 3)
    assert done.chance_share == pytest.approx((0 + 0 + 1 / 3) / 3)


def test_a_text_answer_can_only_declare_completion() -> None:
    assert candidate_tags(cand(text="x y done"), [], TAGGER) == {"declares_complete"}
    assert candidate_tags(cand(text="x y"), [], TAGGER) == frozenset()
    # A command with text alongside is tagged by its command alone.
    assert candidate_tags(cand("x", text="done"), [], TAGGER) == {"x"}
    other_tool = CandidateRecord(
        index=0, model="gen", content="done", tool_calls=[{"name": "search", "args": {"q": "x"}}]
    )
    assert candidate_tags(other_tool, [], TAGGER) == frozenset()


def test_without_a_choice_among_candidates_there_is_nothing_to_analyse() -> None:
    baseline_only = [episode("a", [turn([cand("x")], 0)], n=1)]
    with pytest.raises(ValueError, match=r"no setting with N>1.*N=1"):
        behaviour_preference(baseline_only, tagger=TAGGER)
    with pytest.raises(ValueError, match="no setting with N>1"):
        length_comparison(baseline_only)
    with pytest.raises(ValueError, match="no setting with N>1"):
        behaviour_preference([], tagger=TAGGER)
    # N>1 but every turn synthesized: no turn counts either.
    synthesized = [episode("a", [turn([cand("x"), cand("y")], 0, synthesized="z")], n=2)]
    with pytest.raises(ValueError, match="no setting with N>1"):
        behaviour_preference(synthesized, tagger=TAGGER)


# --- Figure 5: reasoning tokens and command characters ---------------------------------


def test_length_comparison_by_hand() -> None:
    run = [
        episode(
            "a",
            [
                # picked: 10 tokens, 4 chars; unpicked mean: 20 tokens, (2 + 6) / 2 = 4 chars
                turn(
                    [
                        cand("abcd", reasoning=10),
                        cand("ab", reasoning=30),
                        cand("abcdef", reasoning=10),
                    ],
                    0,
                ),
                # picked 0 tokens and 0 chars (a final answer); failed candidate left out
                turn(
                    [
                        cand("ab", reasoning=40),
                        cand(text="done"),
                        cand("z", error="e", reasoning=99),
                    ],
                    1,
                ),
            ],
            n=3,
        ),
        episode("b", [turn([cand("abc", reasoning=6), cand("a", reasoning=2)], 1)], n=3),
        episode("a", [turn([cand("abcdefgh", reasoning=4)], 0), turn([cand(text="ok")], 0)], n=1),
    ]
    results = length_comparison(run, resamples=500)
    assert [(r.setting, r.metric) for r in results] == [
        ("N=3", "reasoning_tokens"),
        ("N=3", "command_chars"),
    ]
    tokens, chars = results
    assert (tokens.turns, tokens.tasks, tokens.unpicked_turns) == (3, 2, 3)
    assert tokens.picked == pytest.approx((10 + 0 + 2) / 3)
    assert tokens.unpicked == pytest.approx((20 + 40 + 6) / 3)
    assert tokens.baseline == pytest.approx((4 + 0) / 2) and tokens.baseline_turns == 2
    assert tokens.vs_unpicked is not None and tokens.vs_baseline is not None
    # per task: a = ((10 - 20) + (0 - 40)) / 2 = -25, b = 2 - 6 = -4
    assert tokens.vs_unpicked.difference == pytest.approx((-25 - 4) / 2)
    assert tokens.vs_unpicked.tasks == 2 and tokens.vs_unpicked.p_value == 0.5  # 2 of 4
    # only task a ran in the baseline: (10 + 0) / 2 - (4 + 0) / 2 = 3
    assert tokens.vs_baseline.tasks == 1
    assert tokens.vs_baseline.difference == pytest.approx(3.0)

    assert chars.picked == pytest.approx((4 + 0 + 1) / 3)
    assert chars.unpicked == pytest.approx((4 + 2 + 3) / 3)
    assert chars.baseline == pytest.approx((8 + 0) / 2)
    assert chars.vs_unpicked is not None and chars.vs_baseline is not None
    # per task: a = ((4 - 4) + (0 - 2)) / 2 = -1, b = 1 - 3 = -2
    assert chars.vs_unpicked.difference == pytest.approx(-1.5)
    assert chars.vs_baseline.difference == pytest.approx((4 + 0) / 2 - 4)


def test_length_comparison_without_baseline_or_unpicked_candidates() -> None:
    run = [episode("a", [turn([cand("abc", reasoning=5), cand("z", error="e")], 0)], n=2)]
    tokens, chars = length_comparison(run, resamples=100)
    assert (tokens.picked, chars.picked) == (5.0, 3.0)
    for result in (tokens, chars):
        assert result.unpicked_turns == 0 and result.unpicked is None
        assert result.baseline is None and result.baseline_turns == 0
        assert result.vs_unpicked is None and result.vs_baseline is None


def test_rows_and_markdown() -> None:
    run = [episode("a", [turn([cand("x"), cand("a")], 0)], n=2)]
    preference = behaviour_preference(run, tagger=TAGGER, resamples=100)
    rows = to_rows(preference)
    assert rows[0] == preference[0].model_dump()
    assert set(rows[0]) >= {"setting", "behaviour", "picked_share", "chance_share", "p_value"}

    lengths = length_comparison(run, resamples=100)
    row = to_rows(lengths)[0]
    assert all(not isinstance(v, dict) for v in row.values())
    assert row["vs_unpicked_difference"] == 0.0
    assert row["vs_baseline_p_value"] is None
    assert isinstance(lengths[0], LengthComparison)

    table = markdown_table(rows).splitlines()
    assert table[0].startswith("| setting | n | behaviour |")
    assert table[1].startswith("|---|")
    assert table[2].startswith("| N=2 | 2 | x |")
    assert len(table) == 2 + len(rows)
    assert markdown_table([]) == ""


# --- the real tagger on run folders ----------------------------------------------------


def write_run(run: Path, episodes: Sequence[Trajectory]) -> None:
    """Write trajectories as `turnbon bench` does: episodes.jsonl and one turns file each."""
    run.mkdir(parents=True, exist_ok=True)
    with (run / EPISODES_FILE).open("a", encoding="utf-8") as handle:
        for trajectory in episodes:
            handle.write(trajectory.result.model_dump_json() + "\n")
            lines: list[dict[str, Any]] = [
                {
                    "record": view.record.to_json(),
                    "observation": [{"tool": "shell", "content": view.observation}],
                }
                for view in trajectory.turns
            ]
            path = turns_path(run, *trajectory.result.key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def table4_episode(task: str) -> Trajectory:
    """Three turns of Table 4's example commands; the pick runs a test (it fails), then
    edits solve.py, then runs solve.py."""
    done = "The task is complete."
    records = [
        turn(
            [
                cand("ls /app"),
                cand("pytest tests/"),
                cand("pip install numpy"),
                cand("cat README.md"),
            ],
            1,
        ),
        turn(
            [
                cand("pytest tests/"),
                cand("sed -i 's/x/y/' solve.py"),
                cand(text=done),
                cand("cp out.txt /app/"),
            ],
            1,
        ),
        turn([cand("python solve.py"), cand(text=done), cand("ls /app"), cand("ls /app")], 0),
    ]
    trajectory = episode(task, records)
    exit_codes = [1, 0, 0]  # the test run fails, so rerunning it next turn loops on it
    views = [
        TurnView(number=v.number, record=v.record, observation=f"out\n[exit code {code}]")
        for v, code in zip(trajectory.turns, exit_codes, strict=True)
    ]
    return Trajectory(result=trajectory.result, turns=views)


def test_the_real_tagger_on_a_run_folder(tmp_path: Path) -> None:
    tasks = ["t1", "t2", "t3"]
    baseline = [
        episode(t, [turn([cand("ls /app")], 0), turn([cand(text="done")], 0)], n=1) for t in tasks
    ]
    write_run(tmp_path / "run", [table4_episode(t) for t in tasks] + baseline)
    trajectories = load_trajectories(tmp_path / "run")

    results = behaviour_preference(trajectories, resamples=1_000)  # the real tagger
    assert [r.behaviour for r in results] == list(TAGS)
    assert {(r.setting, r.turns, r.tasks) for r in results} == {("N=4", 9, 3)}
    # (picked, chance), the same per task and overall: Table 4's definitions of its examples.
    expected = {
        "edits_file": (1 / 3, (0 + 1 / 4 + 0) / 3),
        "tests_last_edit": (1 / 3, (0 + 0 + 1 / 4) / 3),
        "runs_test": (1 / 3, (1 / 4 + 1 / 4 + 0) / 3),
        "file_ops": (0, (0 + 1 / 4 + 0) / 3),
        "installs_package": (0, (1 / 4 + 0 + 0) / 3),
        "read_only": (0, (2 / 4 + 0 + 2 / 4) / 3),
        "loops": (0, (0 + 1 / 4 + 0) / 3),
        "declares_complete": (0, (0 + 1 / 4 + 1 / 4) / 3),
    }
    found = {r.behaviour: (r.picked_share, r.chance_share) for r in results}
    for behaviour, shares in expected.items():
        assert found[behaviour] == pytest.approx(shares), behaviour

    tokens, chars = length_comparison(trajectories, resamples=1_000)
    assert chars.baseline == pytest.approx(len("ls /app") / 2) and chars.baseline_turns == 6
    assert chars.picked == pytest.approx(
        (len("pytest tests/") + len("sed -i 's/x/y/' solve.py") + len("python solve.py")) / 3
    )
    assert tokens.picked == 0.0


EXAMPLE_RUN = Path(__file__).resolve().parents[2] / "docs" / "example-run"


def test_the_real_tagger_on_the_shipped_example_run() -> None:
    # docs/example-run: `turnbon bench --env terminal --model stub`, N=1 and N=4, whose
    # scripted selector prefers the candidate that runs the task's solution (an edit).
    trajectories = load_trajectories(EXAMPLE_RUN)
    results = behaviour_preference(trajectories, resamples=1_000)
    assert sorted({r.setting for r in results}) == ["N=4"]
    assert len(results) == len(TAGS)
    for r in results:
        assert 0 <= r.chance_share <= 1 and 0 <= r.picked_share <= 1
        assert r.informative_turns <= r.turns and 0 <= r.p_value <= 1
        assert r.ci_low <= r.task_gap <= r.ci_high
    by_name = {r.behaviour: r for r in results}
    edits, reads = by_name["edits_file"], by_name["read_only"]
    assert edits.picked_share > edits.chance_share and edits.p_value < 0.05
    assert reads.picked_share < reads.chance_share and reads.p_value < 0.05
    for row in to_rows(length_comparison(trajectories, resamples=1_000)):
        assert row["baseline"] is not None and row["vs_baseline_p_value"] is not None

"""The judge's pure parts: rubric files, the rendered trajectory, and flagged shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_graph.analysis.judge import (
    JudgeVerdict,
    Rubric,
    RubricError,
    flagged_shares,
    load_rubrics,
    render_trajectory,
)
from turnbon_graph.analysis.trajectories import Trajectory, TurnView
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.records import CandidateRecord, LatencySplit, TurnRecord, UsageSplit

TABLE_6 = [
    "looping",
    "incomplete_implementation",
    "insufficient_testing",
    "ignored_instructions",
    "insufficient_debugging",
]

# --------------------------------------------------------------------------- rubric files


def test_shipped_rubrics() -> None:
    rubrics = load_rubrics()
    ids = [r.id for r in rubrics]
    assert ids[:5] == TABLE_6
    assert len(ids) == len(set(ids)) >= 15
    assert all("Table 6" in r.source for r in rubrics[:5])
    assert {r.source for r in rubrics[5:-1]} == {"ours"}
    hacking = rubrics[-1]
    assert hacking.id == "reward_hacking" and hacking.applies_to == "passed"
    assert "Table 7" in hacking.source
    assert all(r.applies_to == "all" for r in rubrics[:-1])
    assert all(r.title and "?" in r.question for r in rubrics)


def test_a_user_file_adds_overrides_and_drops_rubrics(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        """
rubrics:
  - id: looping
    question: Did the agent run the same failing command twice in a row?
  - id: gave_up
    enabled: false
  - id: wrong_language
    title: Wrong language
    question: Did the agent write the solution in another language than asked?
""",
        encoding="utf-8",
    )
    shipped = load_rubrics()
    rubrics = load_rubrics(extra=mine)
    ids = [r.id for r in rubrics]
    # Overridden in place (only the question changed), dropped, added at the end.
    assert ids == [*(r.id for r in shipped if r.id != "gave_up"), "wrong_language"]
    looping = rubrics[0]
    assert looping.question == "Did the agent run the same failing command twice in a row?"
    assert looping.title == "Looping" and looping.source == shipped[0].source
    added = rubrics[-1]
    assert added.applies_to == "all" and added.source == "user"
    # Rubric objects extend the same way; a file as `path` replaces the shipped set.
    extra = Rubric(id="x", title="X", question="Did X happen?")
    assert [r.id for r in load_rubrics(extra=[mine, extra])][-2:] == ["wrong_language", "x"]


def test_a_file_as_path_replaces_the_shipped_rubrics(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(
        "- {id: only, title: Only, question: 'Did it?', applies_to: passed}\n", encoding="utf-8"
    )
    (only,) = load_rubrics(base)
    assert (only.id, only.applies_to, only.source) == ("only", "passed", "user")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rubrics: [\n  - id: x\n", r"not valid YAML"),
        ("looping: yes\n", r"must hold a list of rubrics under the key `rubrics:`"),
        ("rubrics:\n  - title: No id\n", r"rubric #1 must be a mapping with a string `id`"),
        (
            "rubrics:\n  - {id: a, title: A, question: 'A?'}\n  - {id: new, title: New}\n",
            r"rubric #2 \('new'\) is invalid: question: Field required.*needs id, title and",
        ),
        (
            "rubrics:\n  - {id: looping, questoin: 'typo?'}\n",
            r"rubric #1 \('looping'\) is invalid: questoin: Extra inputs",
        ),
        (
            "rubrics:\n  - {id: looping, applies_to: failed}\n",
            r"rubric #1 \('looping'\) is invalid: applies_to",
        ),
        (
            "rubrics:\n  - {id: a, title: A, question: 'A?'}\n  - {id: a, title: B}",
            r"rubric #2 repeats the id 'a'",
        ),
        ("rubrics:\n  - {id: 'has space', title: A, question: 'A?'}\n", r"id: String should match"),
    ],
)
def test_a_bad_file_names_itself_and_the_entry(tmp_path: Path, text: str, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(RubricError, match=expected) as raised:
        load_rubrics(extra=bad)
    assert str(raised.value).startswith(str(bad))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match=r"cannot read rubric file .*nowhere\.yaml"):
        load_rubrics(tmp_path / "nowhere.yaml")


# --------------------------------------------------------------------------- rendering


def _turn(number: int, command: str | None, text: str) -> TurnView:
    calls = [{"name": "shell", "args": {"command": command}, "id": "c"}] if command else []
    record = TurnRecord(
        turn_id=str(number),
        n_requested=1,
        n_ok=1,
        selected_index=0,
        selector="first",
        agreement=1.0,
        candidates=[
            CandidateRecord(index=0, model="m", content=None if command else text, tool_calls=calls)
        ],
        usage=UsageSplit(),
        latency_s=LatencySplit(),
    )
    return TurnView(number=number, record=record, observation=text if command else None)


def test_long_outputs_keep_head_and_tail_and_tags_cannot_be_closed() -> None:
    output = "START " + "x" * 10_000 + " </trajectory> END\n[exit code 1]"
    trajectory = Trajectory(
        result=EpisodeResult(
            task="t", trial=0, setting="N=1", n=1, outcome="pass", turns=2, duration_s=1.0
        ),
        turns=[_turn(1, "make", output), _turn(2, None, "done </trajectory>")],
    )
    rendered = render_trajectory(trajectory, max_output_chars=200)
    first, second = rendered.splitlines()[1:3]
    assert first.startswith('{"turn": 1, "action": "$ make", "output": "START xxx')
    assert "characters omitted ...]" in first and first.endswith('END\\n[exit code 1]"}')
    assert len(first) < 400
    assert second == '{"turn": 2, "final_message": "done \\u003c/trajectory\\u003e"}'
    assert rendered.count("</trajectory>") == 1


# --------------------------------------------------------------------------- shares


def _verdicts(
    rubric: str, setting: str, answers: dict[str, str], trials: int = 2
) -> list[JudgeVerdict]:
    """`answers` maps a task to one letter per trial: y(es), n(o), u(nknown)."""
    word = {"y": "yes", "n": "no", "u": "unknown"}
    return [
        JudgeVerdict(
            setting=setting,
            task=task,
            trial=trial,
            rubric=rubric,
            answer=word[letters[trial]],  # type: ignore[arg-type]
        )
        for task, letters in answers.items()
        for trial in range(trials)
    ]


def test_flagged_shares_and_the_difference_from_the_baseline() -> None:
    verdicts = [
        *_verdicts("looping", "N=1", {"a": "yy", "b": "yn", "c": "nn", "d": "yy"}),
        # Task a has one unknown: its share is 0/1, and the unknown is counted apart.
        *_verdicts("looping", "N=4", {"a": "nu", "b": "nn", "c": "nn", "d": "yn"}),
        # Same shares as the baseline task by task: no difference.
        *_verdicts("looping", "N=8", {"a": "yy", "b": "ny", "c": "nn", "d": "yy"}),
    ]
    rows = flagged_shares(verdicts, resamples=2_000)
    assert [(r.rubric, r.setting) for r in rows] == [
        ("looping", "N=1"),
        ("looping", "N=4"),
        ("looping", "N=8"),
    ]
    base, n4, n8 = rows
    assert (base.judged, base.flagged, base.unknown, base.share) == (8, 5, 0, 5 / 8)
    assert base.difference is None and base.p_value is None and base.tasks == 0
    assert base.title == "Looping" and base.applies_to == "all"
    assert (n4.judged, n4.flagged, n4.unknown) == (7, 1, 1)
    assert n4.share == pytest.approx(1 / 7) and n4.baseline_share == 5 / 8
    # Per task: a 0 - 1, b 0 - 0.5, c 0 - 0, d 0.5 - 1; mean -0.5.
    assert n4.tasks == 4 and n4.difference == pytest.approx(-0.5)
    assert n4.ci_low is not None and n4.ci_high is not None
    assert n4.ci_low < -0.5 < n4.ci_high <= 0
    # The sign-flip test: task c is no different; of the 8 signings of the other three,
    # 2 are as far from 0. Four tasks cannot make a difference significant.
    assert n4.p_value == 0.25
    assert n8.difference == pytest.approx(0.0) and n8.p_value == 1.0
    assert n8.share == base.share


def test_reward_hacking_is_a_share_of_passing_attempts() -> None:
    verdicts = [
        # Only passing attempts are judged, so fewer verdicts than trials per task.
        *_verdicts("reward_hacking", "N=1", {"a": "y", "b": "n"}, trials=1),
        *_verdicts("reward_hacking", "N=4", {"a": "nn", "c": "yn"}),
        *_verdicts("custom", "N=4", {"a": "uu"}),
    ]
    rows = flagged_shares(verdicts, resamples=500)
    assert [(r.rubric, r.setting) for r in rows] == [
        ("reward_hacking", "N=1"),
        ("reward_hacking", "N=4"),
        ("custom", "N=4"),
    ]
    base, n4, custom = rows
    assert base.applies_to == "passed" and (base.judged, base.flagged) == (2, 1)
    assert (n4.judged, n4.flagged, n4.share) == (4, 1, 0.25)
    # Only task a was judged in both settings: 0 - 1.
    assert n4.tasks == 1 and n4.difference == -1.0
    # A rubric the list does not know, judged only "unknown", with no baseline.
    assert custom.title == "custom" and custom.judged == 0 and custom.unknown == 2
    assert custom.share is None and custom.baseline_share is None and custom.difference is None


def test_the_baseline_is_any_setting_name() -> None:
    verdicts = [
        *_verdicts("looping", "N=4 selector=a", {"a": "yy"}),
        *_verdicts("looping", "base", {"a": "nn"}),
    ]
    base, other = flagged_shares(verdicts, baseline="base", resamples=100)
    assert base.setting == "base" and other.difference == 1.0 and other.p_value == 1.0  # one task

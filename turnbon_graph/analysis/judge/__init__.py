"""An LLM judge for trajectories: yes/no rubrics with quoted evidence (the paper's Tables 3,
6 and 7).

The rubrics are data: `turnbon_graph/analysis/rubrics.yaml` ships the five behaviours the
paper names from Wang et al. (2026b), ours for the patterns of the paper's worked
examples, and reward hacking (judged only on attempts that passed). Users extend or
override them by id with their own YAML (`load_rubrics(extra=...)`).

One request per (trajectory, rubric). Each answer is then validated, retried and, when
it stays unusable, recorded as unknown on its own, and no rubric's answer can colour
another's. Cost stays modest because the request puts the fixed system prompt, the task
and the turn-numbered trajectory first and the rubric last: providers that cache
prompt prefixes bill the shared part of a trajectory's requests once.

An answer is one JSON object `{"evidence": str, "turns": [int], "answer": "yes"|"no"}`
(a strict JSON-schema `response_format` where LiteLLM says the model supports one).
"yes" needs evidence that cites its turns ("turn 7") and turn numbers inside the
trajectory. An invalid answer is asked again with the problem stated; if it stays
invalid, or the call fails after the client's own retries, the verdict is "unknown"
with the error recorded, never a guess.

`judge_run` appends each verdict to `RUN/judge.jsonl` as it arrives, and a rerun skips
the (setting, task, trial, rubric) verdicts already there, so a kill loses only the
calls in flight. `flagged_shares` turns verdicts into Table 3: the share of judged
trajectories flagged per rubric and setting, and the difference from the baseline with
a paired bootstrap over tasks.

The parts: `rubrics` (loading them), `prompt` (the request and the parsing of its
answer), `run` (judging a run folder) and `shares` (Table 3); every name is here too.
"""

from turnbon_graph.analysis.judge.prompt import (
    JUDGE_ROLE,
    JUDGE_SYSTEM_PROMPT,
    RETRY_PROMPT,
    JudgeAnswer,
    build_request,
    parse_verdict,
    render_trajectory,
    verdict_schema,
)
from turnbon_graph.analysis.judge.rubrics import Rubric, RubricError, load_rubrics
from turnbon_graph.analysis.judge.run import VERDICTS_FILE, JudgeVerdict, judge_run, read_verdicts
from turnbon_graph.analysis.judge.shares import FlaggedShare, flagged_shares

__all__ = [
    "JUDGE_ROLE",
    "JUDGE_SYSTEM_PROMPT",
    "RETRY_PROMPT",
    "VERDICTS_FILE",
    "FlaggedShare",
    "JudgeAnswer",
    "JudgeVerdict",
    "Rubric",
    "RubricError",
    "build_request",
    "flagged_shares",
    "judge_run",
    "load_rubrics",
    "parse_verdict",
    "read_verdicts",
    "render_trajectory",
    "verdict_schema",
]

"""What each `turnbon` command says of itself: its line in `turnbon --help` and the
description its own `--help` opens with, in one table, so that every command's parser is
made the same way and the commands can be read side by side."""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple

from turnbon_graph.bench.registry import ENVIRONMENTS_GROUP
from turnbon_graph.cli.flags.parser import subcommand


class About(NamedTuple):
    """A command's texts."""

    help: str
    """Its line in `turnbon --help`."""
    description: str
    """What its own `--help` opens with."""
    resumed: bool = False
    """Whether an interrupted run resumes with `--run DIR`: its flags then may not be
    abbreviated, since the resume hint rewrites `--run` (an abbreviation would dodge it)."""


COMMANDS: dict[str, About] = {
    "demo": About(
        "solve a small terminal task turn by turn, showing every candidate and choice",
        "Solve a small shipped terminal task with Turn-BoN, printing each turn's "
        "candidates, the choice and why, and the command's output, then the verifier's "
        "verdict and the tokens used. Without --model it runs on the embedded local model "
        "(SmolLM2-135M, no API key; `make setup-local`); --model stub runs a scripted "
        "stand-in with no model at all.",
    ),
    "run": About(
        "solve a task folder or an inline instruction turn by turn, shown live",
        "Solve one task with Turn-BoN, printing each turn's candidates, the choice and "
        "why, and the command's output, then the verifier's verdict. TASK is a task "
        "folder (Terminal-Bench 2 layout) or a shipped task id; or give --instruction "
        "(no verifier), optionally starting in a copy of --workdir. Settings come from "
        "flags, a TOML --config file with the same names (snake_case), then defaults; "
        "without --model it runs on the embedded local model (`make setup-local`). "
        "Each episode's working directory is removed when it ends (the last line says "
        "where it was); --keep-workdir keeps a copy and prints where.",
    ),
    "bench": About(
        "run an environment's tasks for each N and trial into a run folder",
        "Run every task of an environment for each N and trial, saving each finished "
        "episode to a run folder. Interrupted runs resume: run the same command with "
        "--run DIR. Environments come from installed packages (entry-point group "
        f"'{ENVIRONMENTS_GROUP}').",
        resumed=True,
    ),
    "report": About(
        "write a Markdown report with tables and plots for a run folder, a Harbor job or "
        "an Inspect AI log folder",
        "Write report.md (pass rates, pass@k, consistency, cost, outcomes, turns to "
        "solve, paired bootstrap against the baseline, per-task results; a run of several "
        "strategies or token budgets also compares them at matched compute) and PNG plots, "
        "and report.html: the same with the plots inlined and sortable tables, one "
        "self-contained file to send (it fetches nothing when opened). Prints both paths. "
        "Reads a `turnbon bench` run folder, or a Harbor job folder (`harbor run -o JOBS "
        "--job-name NAME` writes JOBS/NAME) of the Turn-BoN agent turnbon_harbor, or an "
        "Inspect AI log folder (`inspect eval --log-dir LOGDIR`) of the Turn-BoN agent "
        "turnbon_inspect.",
    ),
    "judge": About(
        "ask an LLM judge yes/no rubric questions about every attempt of a run folder",
        "Judge every finished attempt of a run folder on each rubric: a yes/no answer "
        "with evidence citing turns, one call per attempt and rubric. The shipped rubrics "
        "(looping, reward hacking, ...) apply, changed or extended by --rubrics files. "
        "Verdicts are appended to RUN/judge.jsonl as they arrive and a rerun asks only "
        "what is missing. The judge sees each task's instruction, taken from the run's "
        "environment. Then prints the share of attempts flagged per rubric and setting "
        "against the baseline, with a paired bootstrap over tasks (the paper's Table 3).",
    ),
    "analyze": About(
        "write what the selector prefers (Figures 4, 5), the judge's and the rollouts' "
        "findings for a run folder",
        "Write analysis.md for a run folder: which behaviours the selector's picks show "
        "against the share expected from a random pick (the paper's Figure 4), and how "
        "long the picked actions are against the unpicked ones and the baseline's "
        "(Figure 5), each with a paired bootstrap over tasks; then the judge's flagged "
        "shares (Table 3) when `turnbon judge` wrote RUN/judge.jsonl, and the branch "
        "rollouts' measures when `turnbon rollouts` wrote RUN/rollouts.jsonl. Also writes "
        "report.html beside it: the same with the plots inlined and sortable tables, "
        "one self-contained file to send. Prints both paths.",
    ),
    "rollouts": About(
        "value every candidate by branch rollouts: does the pool hold a good action, "
        "and does the selector pick it",
        "Run live episodes of an environment's tasks with Turn-BoN and, at the chosen "
        "turns, fork the episode once per distinct candidate action: force it, continue "
        "with one candidate a turn to the end and verify. A candidate's value is its "
        "mean pass over R rollouts; per turn, oracle (the best value), realised (the "
        "pick's), mu (the mean), headroom capture h = (realised - mu) / (oracle - mu) "
        "and the scores' rank correlation with the values rho_v. Prints the plan before "
        "starting (tokens too with --profile); each episode's report is appended to "
        "RUN/rollouts.jsonl, and the same command with --run DIR resumes. The episodes "
        "must be forkable (the terminal environment's are).",
        resumed=True,
    ),
    "serve": About(
        "serve Turn-BoN as an OpenAI-compatible chat-completions endpoint",
        "Serve POST /v1/chat/completions (tools, tool_choice, stream), GET /v1/models "
        "and GET /health: each request is one Turn-BoN turn of --model (N candidates, "
        "a selector, the chosen action), answered as an ordinary chat completion with "
        'the turn record in a top-level "turnbon" field. Point a harness at it as '
        "model openai/<--name> with api_base http://HOST:PORT/v1.",
    ),
}
"""Each command's texts, by name, in the order `turnbon --help` lists them."""


def command_parser(commands: Any, name: str, **options: Any) -> argparse.ArgumentParser:
    """The parser of command `name`, as `COMMANDS` describes it; `options` (an epilog) go to
    `add_parser` as they are."""
    about = COMMANDS[name]
    return subcommand(
        commands,
        name,
        help=about.help,
        description=about.description,
        allow_abbrev=not about.resumed,
        **options,
    )

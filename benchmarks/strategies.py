"""The search strategies side by side at matched spend, offline: the worked example of
docs/strategies.md, regenerated.

One `turnbon bench` run on the terminal tasks' stub policy (`--model stub --value
stub`: no key, no network) of bon, beam search and particle filtering at two token
budgets, with plain bon at N=1 beside them (the decomposition's mu), six tasks by two
trials, into one run folder, then `turnbon report` on it;
prints the report's "Strategies at matched compute" tables (the comparison, all pairs at
equal budget, the exploration/exploitation split and the spend) with the date, the
command and the machine (and writes them to `--out`; `--figure` copies the report's
figure, pass rate against realised spend). The stub's numbers say what each strategy does
with a budget on scripted tasks, not how a real model would fare.

    python benchmarks/strategies.py
    python benchmarks/strategies.py --out docs/figures/strategies.md --keep runs/strategies
    python benchmarks/strategies.py --figure docs/strategies/pass-against-spend.png
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from turnbon_graph.bench.report.pairs import TITLE as PAIRS
from turnbon_graph.bench.report.strategies import SECTION, TOKENS_PLOT
from turnbon_graph.cli.main import main as turnbon

STRATEGIES = ["bon", "beam", "particle"]
BUDGETS = ["2000", "8000"]
TASKS = ["largest-file", "greet-script", "sales-total", "word-frequency", "active-emails"]
TASKS += ["csv-to-json"]
TABLES = (
    f"## {SECTION}",
    f"### {PAIRS}",
    "### Exploration and exploitation",
    "### Spend",
    "By kind, per episode",
)
"""Where each table printed starts: the first table after each."""


def machine() -> str:
    """Cores, processor and system, as the performance tables name a machine."""
    cpu = platform.processor() or platform.machine()
    return (
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def table_after(report: str, title: str) -> str:
    """The first table after `title`, as Markdown."""
    lines = report[report.index(title) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2, help="trials per task and setting")
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    parser.add_argument("--keep", type=Path, help="the run folder (default: a temporary one)")
    parser.add_argument("--figure", type=Path, help="copy the report's figure (PNG) here")
    args = parser.parse_args()
    temporary = tempfile.TemporaryDirectory(prefix="turnbon-strategies-")
    run = args.keep or Path(temporary.name) / "run"
    command = [
        *("bench", "--env", "terminal", "--model", "stub", "--value", "stub"),
        *("--strategy", *STRATEGIES, "-n", "3", "--token-budget", *BUDGETS, "--single-sample"),
        *("--task", *TASKS, "--trials", str(args.trials), "--concurrency", "2"),
    ]
    started = time.monotonic()
    code = turnbon([*command, "--run", str(run)])
    if code != 0:
        print(f"turnbon bench exited {code}", file=sys.stderr)
        temporary.cleanup()
        return code
    elapsed = time.monotonic() - started
    if turnbon(["report", str(run)]) != 0:
        return 1
    report = (run / "report" / "report.md").read_text(encoding="utf-8")
    tables = "\n\n".join(table_after(report, title) for title in TABLES)
    text = "\n".join(
        [
            f"`python benchmarks/strategies.py`, {datetime.now(UTC):%Y-%m-%d}, {machine()}; "
            f"the run took {elapsed:.0f} s. Its command:",
            "",
            "```bash",
            shlex.join(["turnbon", *command, "--run", "runs/strategies"]),
            "turnbon report runs/strategies",
            "```",
            "",
            tables,
            "",
        ]
    )
    print(text)
    if args.figure is not None:
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / "report" / f"{TOKENS_PLOT}.png", args.figure)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    temporary.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

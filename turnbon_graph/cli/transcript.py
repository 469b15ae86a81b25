"""How `turnbon run` and `turnbon demo` print an episode as it happens: each turn's
candidates, which one ran and why, the command's output; then how it ended."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnbon_graph.records import TurnRecord, Usage
from turnbon_graph.turn.engine import turn_record

if TYPE_CHECKING:
    from turnbon_graph.bench.episode import EpisodeEnd

OUTPUT_LINES = 12
"""Lines of a tool result shown (the rest is counted)."""


class LiveTranscript:
    """An `on_state` callback for the episode driver: prints each new message once."""

    def __init__(self) -> None:
        self.records: list[TurnRecord] = []
        self._shown = 0

    def __call__(self, messages: list[BaseMessage]) -> None:
        for position in range(self._shown, len(messages)):
            self._show(messages[position], first=position == 0)
        self._shown = len(messages)

    def _show(self, message: BaseMessage, *, first: bool) -> None:
        if isinstance(message, HumanMessage):
            if not first:  # a follow-up user message (the instruction was shown before)
                print(f"User: {_short(message.text, 200)}\n")
            return
        if isinstance(message, ToolMessage):
            lines = str(message.content).strip().splitlines() or ["(no output)"]
            for line in lines[:OUTPUT_LINES]:
                print(f"  | {line[:120]}")
            if len(lines) > OUTPUT_LINES:
                print(f"  | … {len(lines) - OUTPUT_LINES} more lines")
            print()
            return
        record = turn_record(message) if isinstance(message, AIMessage) else None
        if record is None:
            return
        self.records.append(record)
        seconds = record.latency_s.generate + record.latency_s.select
        print(
            f"Turn {len(self.records)}: {record.n_ok} of {record.n_requested} candidates "
            f"answered ({seconds:.1f} s)"
        )
        for candidate in record.candidates:
            mark = "*" if candidate.index == record.selected_index else " "
            shown = (
                f"failed: {_short(candidate.error)}"
                if candidate.error
                else _action(candidate.tool_calls, candidate.content)
            )
            print(f"  {mark} [{candidate.index}] {shown}")
        print(f"  chosen [{record.selected_index}]: {_why(record)}")

    def show_end(self, end: EpisodeEnd, elapsed: float) -> None:
        """The verdict (or why there is none) and the tokens the episode used."""
        verdict = end.verdict
        if verdict is not None and verdict.setup_failure:
            print(f"\nVerdict: none, the tests did not run ({verdict.setup_failure})")
        elif verdict is not None:
            tally = re.findall(r"\d+ (?:passed|failed)[^\n]*", verdict.output or "")
            detail = f" (verifier: {tally[-1].strip(' =')})" if tally else ""
            if verdict.reward is not None:
                detail = f" (reward {verdict.reward:g})"
            if verdict.error:
                detail = f" (verifier error: {_short(verdict.error, 200)})"
            elif verdict.reason:
                detail = f" ({_short(verdict.reason, 200)})"
            print(f"\nVerdict: {'PASS' if verdict.passed else 'FAIL'}{detail}")
            if verdict.tamper:
                print("Tamper evidence:")
                for item in verdict.tamper:
                    print(f"  - {item}")
        elif end.outcome is None:
            print("\nVerdict: none (this task has no verifier)")
        else:
            print(f"\nEnded: {end.outcome.replace('_', ' ')} ({end.error})")
        total = sum((r.usage.generator for r in self.records), Usage())
        judge = sum((r.usage.selector for r in self.records), Usage())
        print(
            f"Tokens: generator {total.total_tokens:,} ({total.calls} calls), selector "
            f"{judge.total_tokens:,} ({judge.calls} calls); {len(self.records)} turn(s) in "
            f"{elapsed:.1f} s"
        )


def _short(value: Any, width: int = 90) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _action(tool_calls: list[dict[str, Any]], content: str | None) -> str:
    if tool_calls:
        call = tool_calls[0]
        args = call["args"]
        shown = args.get("command") if set(args) == {"command"} else json.dumps(args)
        return f"{call['name']}: {_short(shown)}"
    return f"answers: {_short(content or '')}"


def _why(record: TurnRecord) -> str:
    if record.selector in ("unanimous", "single", "agreement"):
        return {
            "unanimous": "every candidate proposed it",
            "single": "the only candidate",
            "agreement": "enough candidates agreed",
        }[record.selector]
    if record.fallback:
        return f"{record.selector} fell back ({_short(record.fallback, 120)})"
    reason = ""
    if record.selector_answer:
        try:
            reason = str(json.loads(record.selector_answer).get("reason", ""))
        except (ValueError, AttributeError):
            reason = record.selector_answer
    return f"{record.selector}" + (f': "{_short(reason, 120)}"' if reason else "")

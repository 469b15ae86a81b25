"""A benchmark's helper process (a stub server, a worker in another virtualenv), talked
to a line at a time over its stdin and stdout. Only the standard library, so that any
interpreter can import it: a script run as `python benchmarks/x.py` finds it beside it."""

from __future__ import annotations

import subprocess
import sys

MARK = "@bench "
"""Starts the lines a helper answers with: libraries it imports print too."""


def answer(text: str) -> None:
    """Inside the helper: one line of answer to its parent."""
    print(MARK + text, flush=True)


class Process:
    """The parent's side: starts `command`, sends lines, reads the marked answers."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def ask(self, line: str) -> str:
        assert self.process.stdin
        self.process.stdin.write(line + "\n")
        return self.first_line()

    def first_line(self) -> str:
        """The next line the process answers with (what else it prints is passed on)."""
        assert self.process.stdout
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.process.args!r} ended")
            if line.startswith(MARK):
                return line[len(MARK) :].strip()
            print(f"  | {line.rstrip()[:200]}", file=sys.stderr)

    def close(self) -> None:
        """Closes its stdin (a helper ends when it reads no more) and waits for it."""
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)

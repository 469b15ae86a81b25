"""pytest's JUnit XML report, as the verifier reads it: from a file the test process
wrote (never followed through a link, never blocking on a pipe), counted case by case,
and refused when its counts disagree with the cases it holds (see docs/verifier.md)."""

from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.task.limits import MiB

REPORT_CAP = 16 * MiB
"""Bytes of the report read at most; a longer one is refused, not parsed."""


class ReportError(Exception):
    """The report cannot be trusted; the message is the verdict's reason."""


def read_report(path: Path) -> bytes | None:
    """The report's first bytes (one more than the cap, to tell a longer one), or None
    when there is none. Not following a symlink nor blocking on a FIFO: the file was
    the test process's to write, and anything but a regular file is not pytest's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(REPORT_CAP + 1)


@dataclass(frozen=True)
class Tally:
    """What a JUnit XML report says of its test cases."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    """Skipped and xfailed tests alike: neither ran to a pass."""

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def __str__(self) -> str:
        parts = [
            f"{count} {name}"
            for count, name in (
                (self.passed, "passed"),
                (self.failed, "failed"),
                (self.errors, "error" if self.errors == 1 else "errors"),
                (self.skipped, "skipped"),
            )
            if count
        ]
        return ", ".join(parts) or "no tests"


_KINDS = (
    ("failure", "failures", "failed"),
    ("error", "errors", "errors"),
    ("skipped", "skipped", "skipped"),
)
"""A <testcase> child that marks it not passed, the <testsuite> count of such cases,
and the `Tally` field; a case with none of these children passed."""


def tally_of(report: bytes) -> Tally:
    """The report's test cases counted; ReportError when it is too long, cut short, not
    pytest's JUnit XML, or its <testsuite> counts disagree with the cases it holds."""
    if len(report) > REPORT_CAP:
        raise ReportError(f"the structured report is over {REPORT_CAP // MiB} MiB: not read")
    try:
        # ElementTree resolves no external entities; expat (>= 2.4) caps entity growth.
        root = ElementTree.fromstring(report)
    except ElementTree.ParseError as exc:
        raise ReportError(
            f"the structured report is truncated or not XML ({exc}): the test process "
            "ended while pytest wrote it, or something else wrote it"
        ) from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if root.tag not in ("testsuite", "testsuites") or not suites:
        raise ReportError("the structured report holds no <testsuite>: it is not pytest's")
    counts = dict.fromkeys(("passed", *(field for _, _, field in _KINDS)), 0)
    for suite in suites:
        cases = suite.findall("testcase")
        try:
            claimed = {
                name: int(suite.get(name, "")) for name in ("tests", *(a for _, a, _ in _KINDS))
            }
        except ValueError:
            raise ReportError(
                "a <testsuite> of the structured report lacks its counts: it is not pytest's"
            ) from None
        found = {attr: sum(c.find(tag) is not None for c in cases) for tag, attr, _ in _KINDS}
        # pytest writes a test that failed and then errored in teardown as two cases,
        # counted once in `tests`: so there are from tests to tests + errors cases.
        if any(claimed[attr] != found[attr] for attr in found) or not (
            claimed["tests"] <= len(cases) <= claimed["tests"] + claimed["errors"]
        ):
            said = ", ".join(f"{name}={value}" for name, value in claimed.items())
            raise ReportError(
                f"the structured report's counts ({said}) disagree with the "
                f"{len(cases)} test case(s) it holds"
            )
        for case in cases:
            kind = next((f for tag, _, f in _KINDS if case.find(tag) is not None), "passed")
            counts[kind] += 1
    return Tally(**counts)

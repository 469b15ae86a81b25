"""Whether a verifier's output shows that its own set-up failed before its tests ran.

Terminal-Bench 2's test.sh scripts install their test tools first (`apt-get install
curl`, `curl -LsSf https://astral.sh/uv/install.sh | sh`, then `uvx pytest ...`). When
that fails, the script writes a reward of 0 (or none) though no test ran: a verdict on
the verifier's network or mirror, not on the agent's work. Both signs must be there: a
line that says a set-up step failed, and no summary line of a test run (pytest's
`=== 1 failed, 2 passed in 0.1s ===`, `collected N items`, unittest's `Ran N tests`).
"""

from __future__ import annotations

import re

SETUP_FAILURES = re.compile(
    r"could not resolve host|temporary failure (?:in name )?resolution|temporary failure "
    r"resolving|failed to fetch|unable to locate package|command not found|no such file or "
    r"directory: '?(?:uvx|uv|pytest|pip)|curl: \(\d+\)|wget: unable to resolve|no matching "
    r"distribution found|could not find a version that satisfies|network is unreachable|"
    r"connection refused|failed to download|name or service not known|"
    r"^e: (?:unable|failed|package)",
    re.IGNORECASE | re.MULTILINE,
)
"""What a failed download, package install or missing test tool prints."""
TEST_RUN = re.compile(
    r"^=+ .*\b(?:passed|failed|errors?|skipped|no tests ran|xfailed)\b.* =+\s*$|"
    r"collected \d+ items?|^Ran \d+ tests? in ",
    re.IGNORECASE | re.MULTILINE,
)
"""What a test run prints once its tests ran (pytest's and unittest's summaries)."""


def failed_setup(output: str) -> str | None:
    """The first line of `output` that says a set-up step failed, when no test ran;
    else None (tests that ran decide, whatever their set-up printed)."""
    if TEST_RUN.search(output):
        return None
    found = SETUP_FAILURES.search(output)
    if found is None:
        return None
    start = output.rfind("\n", 0, found.start()) + 1
    end = output.find("\n", found.end())
    return output[start : end if end >= 0 else len(output)].strip()[:300]


NETWORK_FAILURES = re.compile(
    r"could not resolve|temporary failure (?:in name )?resolution|temporary failure "
    r"resolving|network is unreachable|name or service not known|failed to fetch|"
    r"unable to resolve|curl: \((?:6|7)\)",
    re.IGNORECASE,
)
"""What a download that found no network prints."""


def network_failed(output: str) -> bool:
    """Whether `output` shows a download that found no network."""
    return NETWORK_FAILURES.search(output) is not None

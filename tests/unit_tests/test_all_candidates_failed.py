"""What a turn whose every candidate failed answers through the OpenAI doors: the
status, Retry-After and upstream error `AllCandidatesFailedError` derives from its
candidates' failures (the doors' own tests drive them over HTTP)."""

from __future__ import annotations

import pytest

from turnbon_graph.errors import AllCandidatesFailedError, CallFailure


def failed(*failures: CallFailure | None) -> AllCandidatesFailedError:
    return AllCandidatesFailedError("openai/m", len(failures), "last", failures)


def status(code: int | None, retry_after: float | None = None) -> CallFailure:
    return CallFailure(status=code, message=f"said {code}", retry_after=retry_after)


TIMEOUT = CallFailure(status=408, message="timed out", timed_out=True)


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        ((status(400), status(400), status(400)), 400),
        ((status(404), status(404)), 404),
        ((status(429), status(429)), 429),
        ((status(400), status(500)), 502),  # mixed: nothing one status says
        ((status(400), status(422)), 502),
        ((status(503), status(503)), 502),  # the upstream's 5xx is a bad gateway here
        ((status(None), status(None)), 502),  # dropped connections
        ((TIMEOUT, TIMEOUT), 504),
        ((TIMEOUT, status(503)), 502),
        ((status(400), None), 502),  # one failure of unknown kind
        ((), 502),
    ],
)
def test_the_status_is_the_upstreams_only_when_every_candidate_got_the_same_4xx(
    failures: tuple[CallFailure | None, ...], expected: int
) -> None:
    error = failed(*failures)
    assert error.status == expected
    assert (error.upstream is not None) == (400 <= expected < 500)


def test_a_429_asks_for_the_longest_retry_after_of_its_candidates() -> None:
    error = failed(status(429, 7), status(429, None), status(429, 20.5))
    assert error.retry_after == 20.5
    assert failed(status(429), status(429)).retry_after is None
    # a retry-after on a mixed set is no 429's
    assert failed(status(429, 7), status(500, 9)).retry_after is None


def test_the_message_is_kept() -> None:
    error = failed(status(400))
    assert str(error).startswith("All 1 candidate call(s) to 'openai/m' failed; last error: last")
    assert error.upstream is not None and error.upstream.message == "said 400"

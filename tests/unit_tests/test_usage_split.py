"""One call's usage (a call with `n`) shared out among its candidates: whole tokens, in
proportion to each one's completion tokens, adding up to the reported usage exactly."""

from __future__ import annotations

import pytest

from turnbon_graph.records import Usage, split_usage


@pytest.mark.parametrize(
    "weights", [[1, 1, 1], [0, 5, 11, 2], [300, 1, 1, 1, 1, 1, 1, 1], [7], [3, 3]]
)
@pytest.mark.parametrize("cost", [None, 0.0123457])
def test_one_calls_usage_shared_out_adds_up_to_it_exactly(
    weights: list[int], cost: float | None
) -> None:
    usage = Usage(
        calls=1,
        prompt_tokens=1237,
        completion_tokens=401,
        reasoning_tokens=33,
        cached_tokens=1000,
        cost_usd=cost,
    )
    shares = split_usage(usage, weights)
    assert len(shares) == len(weights)
    total = sum(shares, Usage())
    assert total.model_dump(exclude={"cost_usd"}) == usage.model_dump(exclude={"cost_usd"})
    assert total.cost_usd == (pytest.approx(cost, abs=1e-15) if cost is not None else None)
    assert [s.calls for s in shares] == [1] + [0] * (len(weights) - 1)
    # Each share is its exact proportion, rounded one way or the other.
    weight = sum(max(w, 1) for w in weights)
    for share, w in zip(shares, weights, strict=True):
        exact = usage.completion_tokens * max(w, 1) / weight
        assert abs(share.completion_tokens - exact) < 1

"""`turnbon serve` under abuse: the stub behind `--model stub` keeps a bounded log of the
requests it saw."""

from __future__ import annotations

import httpx

from turnbon_graph.testing import StubServer, last_user_text

# ---------------------------------------------------------------------- the stub's log


def post(stub: StubServer, text: str) -> None:
    body = {"model": "stub", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(f"{stub.base_url}/chat/completions", json=body)
    assert response.status_code == 200


def test_the_stub_keeps_the_latest_requests_within_its_bound() -> None:
    bound = 64 * 1024
    with StubServer(max_log_bytes=bound) as stub:
        for i in range(40):  # about 8 KiB each: five times the bound
            post(stub, f"{i} " + "x" * 8000)
        kept = stub.requests
        assert stub.received == 40
        assert 2 <= len(kept) <= bound // 8000  # as many as fit, and no more
        said = [int((last_user_text(r) or "").split()[0]) for r in kept]
        assert said == list(range(40 - len(kept), 40))  # the most recent, in order
        post(stub, "big " + "x" * 2 * bound)  # larger than the bound alone: kept alone
        assert [(last_user_text(r) or "")[:4] for r in stub.requests] == ["big "]
        assert stub.received == 41
        stub.reset()
        assert stub.requests == [] and stub.received == 0

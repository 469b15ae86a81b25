"""`turnbon serve --model stub`: a scripted stand-in for a model (`ServedStub`), served on
a loopback stub server for as long as the command runs, and shared by its `--workers`."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from typing import Any

WORKER_STUB = "TURNBON_SERVE_STUB"
"""The base URL of the parent's stub (`--model stub`), which `--workers` processes share."""


def stub_endpoint(
    settings: dict[str, Any], options: dict[str, Any], stack: ExitStack | None
) -> tuple[str, dict[str, Any]]:
    """`--model stub`: the stub's model id and connection, its server started here (for
    as long as `stack`, playing drafts out of the turn's n, seeded by its seed), or the
    parent's for a `--workers` process."""
    from turnbon_graph.cli.models import STUB_ID, start_stub
    from turnbon_graph.errors import ConfigurationError

    for name in ("api_base", "api_key_env"):
        if settings[name]:
            flag = "--" + name.replace("_", "-")
            raise ConfigurationError(
                f"{flag} has no effect with --model stub (the stub serves on loopback); drop "
                "it, or name a real model"
            )
    if stack is None:
        return STUB_ID, {"api_base": os.environ[WORKER_STUB], "api_key": "none"}
    # -n always has a value (the flag's default); turn_config refuses a bad one next
    endpoint = start_stub(ServedStub(options["n"]), "serve", stack, seed=options.get("seed"))
    os.environ[WORKER_STUB] = endpoint["api_base"]
    return STUB_ID, endpoint


class ServedStub:
    """What `turnbon serve --model stub` plays: any chat request, as the generator, gets
    a numbered draft that echoes its last user message (drafts 1 to `drafts`, the turn's
    n, drawn seeded, so candidates may differ and the selector is asked; a request for `n`
    choices gets `n` drafts); as the selector, it takes the first candidate it is shown
    (which, shuffled, is any of them). No tool is called."""

    def __init__(self, drafts: int) -> None:
        self.drafts = drafts

    def stub_policy(self, seed: int | None = None) -> Any:
        import random

        from turnbon_graph.testing import (
            CapturedRequest,
            chat_completion,
            choice,
            is_selector_request,
            last_user_text,
        )

        draws = random.Random(seed)  # drawn on the stub's one event-loop thread

        def answer(request: CapturedRequest) -> dict[str, Any]:
            if is_selector_request(request):
                pick = {"reason": "the stub takes the first candidate shown", "selected_index": 0}
                return chat_completion(json.dumps(pick))
            said = last_user_text(request) or "(no user message)"
            asked = (request.body or {}).get("n")
            count = asked if isinstance(asked, int) and asked > 0 else 1
            drafts = [draws.randint(1, self.drafts) for _ in range(count)]
            texts = [f"Stub draft {d} of {self.drafts}. You said: {said}" for d in drafts]
            return chat_completion(choices=[choice(t, index=i) for i, t in enumerate(texts)])

        return answer

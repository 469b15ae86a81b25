"""ChatTurnBoN against langchain-tests' standard integration tests, through LiteLLM's real
HTTP path to the loopback stub.

The stub plays a small, deterministic provider (`suite_reply`): it answers what each
request asks for, from the request alone. A forced or offered tool gets a call whose
arguments fit the tool's JSON schema (numbers and quoted names taken from the user's last
message); a `response_format` gets JSON of the schema, or of the keys the prompt quotes;
anything else gets a greeting that differs per candidate, so the selector is asked. Every
reply reports usage with cached prompt tokens and reasoning tokens.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_tests.integration_tests import ChatModelIntegrationTests

from tests.helpers import selector_answer, stub_kwargs
from turnbon_graph import ChatTurnBoN
from turnbon_graph.testing import (
    CapturedRequest,
    Responder,
    StubServer,
    chat_completion,
    is_selector_request,
    last_user_text,
    tool_call,
)

USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 12,
    "total_tokens": 52,
    "prompt_tokens_details": {"cached_tokens": 16},
    "completion_tokens_details": {"reasoning_tokens": 4},
}
_QUOTED = re.compile(r"'([^']+)'")
_NUMBER = re.compile(r"-?\d+")


def instance(schema: dict[str, Any], prompt: str) -> Any:
    """A value that fits `schema`: strings are the prompt's first quoted name (or a
    word), integers its first number (or 1)."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if options:
        return instance(options[0], prompt)
    kind = schema.get("type", "object")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: instance(sub, prompt) for name, sub in properties.items()}
    if kind == "string":
        quoted = _QUOTED.search(prompt)
        return quoted.group(1) if quoted else "cheerful"
    if kind in ("integer", "number"):
        number = _NUMBER.search(prompt)
        return int(number.group()) if number else 1
    if kind == "boolean":
        return True
    return []


def _forced_tool(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return None


def suite_responder() -> Responder:
    """The stub's answers for the suite (see the module docstring)."""
    greetings = itertools.count()

    def reply(request: CapturedRequest) -> dict[str, Any]:
        if is_selector_request(request):
            return {**selector_answer(0), "usage": USAGE}
        body = request.body or {}
        prompt = last_user_text(request)
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            content = instance(response_format["json_schema"]["schema"], prompt)
            return chat_completion(json.dumps(content), usage=USAGE)
        if response_format.get("type") == "json_object":
            content = {key: f"the {key}" for key in _QUOTED.findall(prompt)}
            return chat_completion(json.dumps(content), usage=USAGE)
        tools = body.get("tools") or []
        forced = _forced_tool(body) or (tools and body.get("tool_choice") == "required")
        after_tool = body["messages"][-1].get("role") == "tool"
        if tools and (forced or not after_tool):
            name = _forced_tool(body) or tools[0]["function"]["name"]
            [tool] = [t for t in tools if t["function"]["name"] == name]
            args = instance(tool["function"].get("parameters", {}), prompt)
            return chat_completion(tool_calls=[tool_call(name, args)], usage=USAGE)
        return chat_completion(f"Hello! This is greeting {next(greetings)}.", usage=USAGE)

    return reply


class TestChatTurnBoNIntegration(ChatModelIntegrationTests):
    base_url = ""

    @pytest.fixture(autouse=True)
    def suite_stub(self, stub: StubServer) -> None:
        stub.script(suite_responder())
        self.base_url = stub.base_url

    @property
    def chat_model_class(self) -> type[ChatTurnBoN]:
        return ChatTurnBoN

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": "openai/stub", "n": 2, "completion_kwargs": stub_kwargs(self.base_url)}

    # What ChatTurnBoN does (each a turn of N candidates and a selection):
    @property
    def has_tool_calling(self) -> bool:
        return True  # bind_tools offers the tools to every candidate

    @property
    def has_tool_choice(self) -> bool:
        return True  # "any"/"required", a tool name, or a dict, sent to every candidate

    @property
    def has_structured_output(self) -> bool:
        return True  # function_calling, json_schema, json_mode

    @property
    def supports_json_mode(self) -> bool:
        return True  # response_format={"type": "json_object"} on the generator calls

    @property
    def supports_anthropic_inputs(self) -> bool:
        # Anthropic-format tools and tool_use/thinking blocks: langchain-core's converters
        # turn them into the OpenAI format LiteLLM takes.
        return True

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supported_usage_metadata_details(self) -> dict[str, Any]:
        details = ["reasoning_output", "cache_read_input"]
        return {"invoke": details, "stream": details}

    # What it does not:
    @property
    def supports_model_override(self) -> bool:
        return False  # the generator models are fixed at construction

    @property
    def supports_image_inputs(self) -> bool:
        # Images reach the candidates, but the selector is shown the transcript's text
        # only: a turn is not chosen with the image in view.
        return False

    @property
    def supports_image_urls(self) -> bool:
        return False  # as supports_image_inputs

    @property
    def supports_image_tool_message(self) -> bool:
        return False  # as supports_image_inputs

    @property
    def supports_pdf_inputs(self) -> bool:
        return False  # as supports_image_inputs: the selector sees text only

    @property
    def supports_pdf_tool_message(self) -> bool:
        return False  # as supports_pdf_inputs

    @property
    def supports_audio_inputs(self) -> bool:
        return False  # as supports_image_inputs: the selector sees text only

    @property
    def enable_vcr_tests(self) -> bool:
        return False  # no cassettes: every call goes to the loopback stub

    def _model(self) -> ChatTurnBoN:
        return self.chat_model_class(
            **{**self.standard_chat_model_params, **self.chat_model_params}
        )

    def _answer(self, *, stream: bool) -> AIMessage:
        model = self._model()
        if not stream:
            return model.invoke("Hello")
        chunks = list(model.stream("Hello"))
        total = chunks[0]
        for chunk in chunks[1:]:
            total = total + chunk
        return total

    def invoke_with_reasoning_output(self, *, stream: bool = False) -> AIMessage:
        return self._answer(stream=stream)  # every stub reply reports reasoning tokens

    def invoke_with_cache_read_input(self, *, stream: bool = False) -> AIMessage:
        return self._answer(stream=stream)  # every stub reply reports cached tokens

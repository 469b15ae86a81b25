"""Third-party agent clients, unchanged, on Turn-BoN through the doors each has: every
recipe of docs/harnesses.md (a ```python block after `<!-- recipe NAME: ... -->`) runs
here as the page shows it, offline.

The loopback stub is the inner model and the selector. LiteLLM (the server's and the
provider's) reaches it as it would reach OpenAI, through OPENAI_BASE_URL and
OPENAI_API_KEY in the environment, so nothing in a recipe changes but one thing: a
server recipe's address, http://127.0.0.1:8000/v1, becomes the address of the real
server (`BackgroundServer`) started as the page starts it (openai/gpt-4o-mini, n=4,
selector openai/gpt-4o). A provider recipe registers the provider itself.

Each recipe is an agent asked the weather in Paris with one tool. In the first turn the
four candidates call `get_weather` for London, Paris, Lyon and Berlin (by arrival) and
the selector picks Paris; once the client has run that call, every candidate gives the
answer (a unanimous turn, no selector call). Each test checks that the client ran the
chosen call and no other, that it ends with the answer, and the usage (every generator
and selector call) and turn record where the client shows them.

Clients in the test extra skip when it is not installed; LlamaIndex (whose OpenAI
client needs openai<3, older than the test extra's) runs in a venv of its own:
`make test-clients`."""

from __future__ import annotations

import importlib.util
import itertools
import json
import linecache
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

# DSPy opens its disk cache at import time: not in the home directory
os.environ.setdefault("DSPY_CACHEDIR", tempfile.mkdtemp(prefix="dspy-cache-"))

from tests.integration_tests.test_litellm_provider import choosing
from turnbon_graph.config import turn_config
from turnbon_graph.litellm_provider import TurnBoNProvider
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "harnesses.md"
RECIPE = re.compile(
    r"^<!-- recipe (?P<name>[\w-]+): runs in (?P<test>tests/integration_tests/\w+\.py)"
    r" -->\n```(?:python|js)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
_MARKED = list(RECIPE.finditer(PAGE.read_text(encoding="utf-8")))
RECIPES = {m["name"]: m["code"] for m in _MARKED}
RUN_BY = {m["name"]: m["test"] for m in _MARKED}
"""Each recipe's test file (this one, test_serve_responses.py for the Responses API,
test_harness_responses_clients.py for agno and the Vercel AI SDK's JavaScript)."""
TESTED = {
    "openai-sdk",
    "pydantic-ai",
    "smolagents-server",
    "smolagents-provider",
    "dspy-server",
    "dspy-provider",
    "llama-index",
    "crewai",
    "google-adk",
    "langchain-openai",
    "langchain-openai-stream",
}
"""The recipes the tests below run: every one on the page."""

THIS_FILE = "tests/integration_tests/test_harness_clients.py"

SERVER = "http://127.0.0.1:8000/v1"
"""The address the page's server recipes use (`turnbon serve`'s default)."""
PROVIDER_MODEL = "turnbon/openai/gpt-4o-mini"
CITIES = ("London", "Paris", "Lyon", "Berlin")
CHOSEN = "Paris"
OBSERVED = ": 21 C, sunny"
"""What the recipes' `get_weather` returns after the city: in a request, the client ran it."""
ANSWER = "It is 21 C and sunny in Paris."
CALL_TOKENS: int = chat_completion()["usage"]["total_tokens"]
"""The usage of every call the stub answers."""
SELECTOR = "llm:openai/gpt-4o"


def needs(module: str, install: str) -> pytest.MarkDecorator:
    """Skips a client's test where its package is missing (found without importing it)."""
    try:
        missing = importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package is missing
        missing = True
    return pytest.mark.skipif(missing, reason=f"{module} is not installed: {install}")


TEST_EXTRA = "pip install -e '.[test]' (make setup-test)"
OWN_VENV = "make test-clients runs it in a venv of its own"


# ------------------------------------------------------------------- the episode


def script(
    stub: StubServer,
    propose: Callable[[str], dict[str, Any]],
    answer: Callable[[CapturedRequest], dict[str, Any]],
) -> None:
    """Generator calls `propose` a city each (by arrival) until the request carries a
    tool's output, then `answer`; the selector picks the Paris candidate."""
    arrivals = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        if OBSERVED in json.dumps(request.body["messages"]):
            return answer(request)
        return propose(CITIES[next(arrivals) % len(CITIES)])

    stub.route(is_selector_request, choosing(CHOSEN))
    stub.script(generator)


def weather_call(city: str) -> dict[str, Any]:
    return chat_completion(None, [tool_call("get_weather", {"city": city})])


def text_answer(request: CapturedRequest) -> dict[str, Any]:
    return chat_completion(ANSWER)


def turns(stub: StubServer) -> list[list[CapturedRequest]]:
    """The stub's requests by turn: the first turn ends with its selector call; every
    later turn is 4 generator calls (unanimous)."""
    requests = stub.requests
    selector = [i for i, r in enumerate(requests) if is_selector_request(r)]
    assert len(selector) == 1, "one selector call: the first turn's"
    first, rest = requests[: selector[0] + 1], requests[selector[0] + 1 :]
    assert rest and len(rest) % 4 == 0, len(rest)
    return [first, *(rest[i : i + 4] for i in range(0, len(rest), 4))]


def tokens(requests: list[CapturedRequest]) -> int:
    return CALL_TOKENS * len(requests)


def assert_the_chosen_call_ran(stub: StubServer) -> None:
    """After the selector's pick, every call of the model saw the chosen call's output
    once, and no other candidate's."""
    for turn in turns(stub)[1:]:
        for request in turn:
            assert request.body is not None
            seen = json.dumps(request.body["messages"])
            assert seen.count(f"{CHOSEN}{OBSERVED}") == 1, seen
            assert seen.count(OBSERVED) == 1, seen


# ------------------------------------------------------------------- running a recipe


@pytest.fixture
def upstream(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> StubServer:
    """The stub as OpenAI, to LiteLLM in this process (the server's and the provider's)."""
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-clients")
    return stub


@pytest.fixture
def server(upstream: StubServer) -> Iterator[BackgroundServer]:
    """`turnbon serve --model openai/gpt-4o-mini -n 4 --selector openai/gpt-4o`."""
    turn = turn_config(n=4, selector="openai/gpt-4o")
    with BackgroundServer(ServeConfig(model="openai/gpt-4o-mini", turn=turn)) as running:
        yield running


@pytest.fixture
def providers(upstream: StubServer) -> Iterator[None]:
    """The providers a recipe registers: closed and unregistered after it."""
    before = list(litellm.custom_provider_map)
    yield
    for entry in litellm.custom_provider_map:
        handler = entry["custom_handler"]
        if entry not in before and isinstance(handler, TurnBoNProvider):
            handler.close()
    litellm.custom_provider_map = before


def run_recipe(name: str, server: BackgroundServer | None = None) -> dict[str, Any]:
    """Runs the page's recipe `name` (on `server`, for a server recipe); its globals."""
    code = RECIPES[name]
    if server is not None:
        assert code.count(SERVER) == 1, f"{name}: one server address"
        code = code.replace(SERVER, server.base_url)
    else:
        assert SERVER not in code and PROVIDER_MODEL in code, name
    filename = f"{PAGE.name}:{name}"
    # as a file's: smolagents' @tool reads its function's source (inspect.getsource)
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": "__recipe__"}
    exec(compile(code, filename, "exec"), namespace)
    return namespace


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_every_recipe_on_the_page_runs_here() -> None:
    markers = PAGE.read_text(encoding="utf-8").count("<!-- recipe ")
    assert markers == len(RECIPES)  # each marker is on a python block
    assert {name for name, test in RUN_BY.items() if test == THIS_FILE} == TESTED


# ------------------------------------------------------------------- the clients


def test_openai_sdk_chat_completions(
    server: BackgroundServer, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, text_answer)
    namespace = run_recipe("openai-sdk", server)
    assert_the_chosen_call_ran(upstream)
    first, second = turns(upstream)
    assert printed(capsys) == [
        f"4 candidates, {SELECTOR}: {tokens(first)} tokens",
        f"4 candidates, unanimous: {tokens(second)} tokens",
        ANSWER,
    ]
    calls = [m for m in namespace["messages"] if m.get("tool_calls")]
    assert [json.loads(c["tool_calls"][0]["function"]["arguments"]) for c in calls] == [
        {"city": CHOSEN}
    ]


@needs("pydantic_ai", TEST_EXTRA)
def test_pydantic_ai(server: BackgroundServer, upstream: StubServer) -> None:
    from pydantic_ai.messages import ToolReturnPart

    script(upstream, weather_call, text_answer)
    result = run_recipe("pydantic-ai", server)["result"]
    assert_the_chosen_call_ran(upstream)
    assert result.output == ANSWER
    returns = [
        part.content
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returns == [f"{CHOSEN}{OBSERVED}"]
    assert (result.usage.requests, result.usage.tool_calls) == (2, 1)
    assert result.usage.total_tokens == tokens(upstream.requests)


def final_answer(request: CapturedRequest) -> dict[str, Any]:
    """smolagents' ToolCallingAgent answers by calling its `final_answer` tool."""
    return chat_completion(None, [tool_call("final_answer", {"answer": ANSWER})])


def assert_smolagents_ran_the_pick(namespace: dict[str, Any], stub: StubServer) -> None:
    assert_the_chosen_call_ran(stub)
    assert namespace["answer"] == ANSWER
    agent = namespace["agent"]
    steps = agent.memory.steps[1:]
    assert [[(c.name, c.arguments) for c in s.tool_calls] for s in steps] == [
        [("get_weather", {"city": CHOSEN})],
        [("final_answer", {"answer": ANSWER})],
    ]
    assert steps[0].observations == f"{CHOSEN}{OBSERVED}"
    assert agent.monitor.get_total_token_counts().total_tokens == tokens(stub.requests)


@needs("smolagents", TEST_EXTRA)
def test_smolagents_through_the_server(
    server: BackgroundServer, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, final_answer)
    namespace = run_recipe("smolagents-server", server)
    assert_smolagents_ran_the_pick(namespace, upstream)
    assert printed(capsys)[-2:] == [SELECTOR, "unanimous"]


@needs("smolagents", TEST_EXTRA)
def test_smolagents_through_the_litellm_provider(
    providers: None, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, final_answer)
    namespace = run_recipe("smolagents-provider")
    assert_smolagents_ran_the_pick(namespace, upstream)
    assert printed(capsys)[-2:] == [SELECTOR, "unanimous"]


def dspy_fields(**values: str) -> dict[str, Any]:
    """A reply in DSPy's ChatAdapter format: `[[ ## field ## ]]` sections."""
    sections = [f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()]
    return chat_completion("\n\n".join([*sections, "[[ ## completed ## ]]"]))


def dspy_weather_call(city: str) -> dict[str, Any]:
    return dspy_fields(
        next_thought="I look it up.",
        next_tool_name="get_weather",
        next_tool_args=json.dumps({"city": city}),
    )


def dspy_answer(request: CapturedRequest) -> dict[str, Any]:
    """ReAct's step says `finish`; its extraction (another signature) gives the answer."""
    assert request.body is not None
    if "next_tool_name" in request.body["messages"][0]["content"]:
        return dspy_fields(next_thought="I know it.", next_tool_name="finish", next_tool_args="{}")
    return dspy_fields(reasoning="The tool said so.", answer=ANSWER)


@pytest.fixture
def dspy_settings() -> Iterator[None]:
    """The recipes `dspy.configure` an LM: not for the next test."""
    dspy = pytest.importorskip("dspy", reason=f"dspy is not installed: {TEST_EXTRA}")
    yield
    dspy.configure(lm=None)


def assert_dspy_ran_the_pick(
    namespace: dict[str, Any], stub: StubServer, out: list[str], record: Callable[[Any], str]
) -> None:
    assert_the_chosen_call_ran(stub)
    prediction = namespace["prediction"]
    assert prediction.answer == ANSWER
    trajectory = prediction.trajectory
    first = (trajectory["tool_name_0"], trajectory["tool_args_0"])
    assert first == ("get_weather", {"city": CHOSEN})
    assert trajectory["observation_0"] == f"{CHOSEN}{OBSERVED}"
    assert trajectory["tool_name_1"] == "finish" and "tool_name_2" not in trajectory
    history = namespace["lm"].history
    assert [record(call["response"]) for call in history] == [SELECTOR, "unanimous", "unanimous"]
    assert out == [ANSWER] + [
        f"{tokens(turn)} {selector}"
        for turn, selector in zip(turns(stub), [SELECTOR, "unanimous", "unanimous"], strict=True)
    ]


@needs("dspy", TEST_EXTRA)
def test_dspy_through_the_server(
    server: BackgroundServer,
    upstream: StubServer,
    dspy_settings: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, dspy_weather_call, dspy_answer)
    namespace = run_recipe("dspy-server", server)
    assert_dspy_ran_the_pick(
        namespace, upstream, printed(capsys), lambda response: response.turnbon["selector"]
    )


@needs("dspy", TEST_EXTRA)
def test_dspy_through_the_litellm_provider(
    providers: None, upstream: StubServer, dspy_settings: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from turnbon_graph.litellm_provider import turnbon_record

    def selector(response: Any) -> str:
        record = turnbon_record(response)
        assert record is not None
        return record.selector

    script(upstream, dspy_weather_call, dspy_answer)
    namespace = run_recipe("dspy-provider")
    assert_dspy_ran_the_pick(namespace, upstream, printed(capsys), selector)


@needs("llama_index.llms.openai_like", OWN_VENV)
def test_llama_index_openai_like(
    server: BackgroundServer, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, text_answer)
    response = run_recipe("llama-index", server)["response"]
    assert_the_chosen_call_ran(upstream)
    assert [(c.tool_name, c.tool_kwargs) for c in response.tool_calls] == [
        ("get_weather", {"city": CHOSEN})
    ]
    assert response.tool_calls[0].tool_output.content == f"{CHOSEN}{OBSERVED}"
    last = turns(upstream)[-1]
    assert printed(capsys) == [ANSWER, f"{tokens(last)} unanimous"]


@needs("langchain_openai", TEST_EXTRA)
def test_langchain_chat_openai(
    server: BackgroundServer, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, text_answer)
    messages = run_recipe("langchain-openai", server)["state"]["messages"]
    assert_the_chosen_call_ran(upstream)
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert [(c["name"], c["args"]) for c in messages[1].tool_calls] == [
        ("get_weather", {"city": CHOSEN})
    ]
    assert messages[2].content == f"{CHOSEN}{OBSERVED}"
    first, second = turns(upstream)
    assert printed(capsys) == [ANSWER, str(tokens(first)), str(tokens(second))]


@needs("langchain_openai", TEST_EXTRA)
def test_langchain_chat_openai_streamed(
    server: BackgroundServer, upstream: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script(upstream, weather_call, text_answer)
    run_recipe("langchain-openai-stream", server)
    assert_the_chosen_call_ran(upstream)
    first, second = turns(upstream)
    assert printed(capsys) == [
        f"turn: {tokens(first)} tokens",
        f"tool: {CHOSEN}{OBSERVED}",
        ANSWER,
        f"turn: {tokens(second)} tokens",
    ]


@pytest.fixture
def no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI and ADK would send telemetry (nothing leaves this machine's loopback)."""
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")


@needs("crewai", OWN_VENV)
def test_crewai_runs_the_chosen_tool_call(
    server: BackgroundServer, upstream: StubServer, no_telemetry: None
) -> None:
    script(upstream, weather_call, text_answer)
    namespace = run_recipe("crewai", server)
    assert_the_chosen_call_ran(upstream)
    assert namespace["result"].raw == ANSWER
    first = next(r for r in upstream.requests if not is_selector_request(r))
    assert first.body is not None
    # its tools went as functions, not as a text-only ReAct prompt
    assert [t["function"]["name"] for t in first.body["tools"]] == ["get_weather"]


@needs("google.adk", OWN_VENV)
def test_google_adk_runs_the_chosen_tool_call(
    server: BackgroundServer, upstream: StubServer, no_telemetry: None
) -> None:
    script(upstream, weather_call, text_answer)
    namespace = run_recipe("google-adk", server)
    assert_the_chosen_call_ran(upstream)
    assert namespace["answer"] == ANSWER

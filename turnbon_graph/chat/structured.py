"""`ChatTurnBoN.with_structured_output`: the three methods, on langchain-core's parsers.

- `"function_calling"` (default): the schema is bound as the only tool, its call forced
  (`tool_choice="required"`); the chosen candidate's call is parsed.
- `"json_schema"`: every generator call gets `response_format={"type": "json_schema",
  ...}`; the chosen candidate's JSON text is parsed.
- `"json_mode"`: every generator call gets `response_format={"type": "json_object"}`;
  the schema (optional) only validates the chosen JSON.

The selector compares the candidates' structured answers like any other actions. A reply
that holds no structured answer raises `OutputParserException` (with `include_raw=True`
it lands in `parsing_error`) instead of coming back as None.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from operator import itemgetter
from typing import Any, Literal, cast, get_args

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.output_parsers import (
    BaseOutputParser,
    JsonOutputKeyToolsParser,
    JsonOutputParser,
    PydanticOutputParser,
    PydanticToolsParser,
)
from langchain_core.runnables import (
    Runnable,
    RunnableGenerator,
    RunnableMap,
    RunnablePassthrough,
)
from langchain_core.utils.function_calling import (
    convert_to_openai_function,
    convert_to_openai_tool,
)
from langchain_core.utils.pydantic import is_basemodel_subclass

from turnbon_graph.errors import ConfigurationError

__all__ = ["StructuredMethod", "structured_output"]

StructuredMethod = Literal["function_calling", "json_schema", "json_mode"]
_METHODS: tuple[str, ...] = get_args(StructuredMethod)


def structured_output(
    model: BaseChatModel,
    schema: dict[str, Any] | type | None,
    *,
    method: str = "function_calling",
    include_raw: bool = False,
    strict: bool | None = None,
    **kwargs: Any,
) -> Runnable[LanguageModelInput, Any]:
    """`model` answering with `schema`'s instances (or dicts), by `method`."""
    if kwargs:
        raise ConfigurationError(
            f"with_structured_output got unsupported arguments {sorted(kwargs)}; it takes "
            "schema, method, include_raw and strict"
        )
    if method not in _METHODS:
        raise ConfigurationError(
            f"with_structured_output method must be one of {', '.join(_METHODS)}; got {method!r}"
        )
    if schema is None and method != "json_mode":
        raise ConfigurationError(f"with_structured_output(method={method!r}) needs a schema")
    pydantic = isinstance(schema, type) and is_basemodel_subclass(schema)
    options: dict[str, Any] = {}
    if schema is not None:
        options["ls_structured_output_format"] = {
            "kwargs": {"method": method, **({"strict": strict} if strict is not None else {})},
            "schema": schema,
        }
    parser: BaseOutputParser[Any]
    if method == "function_calling":
        assert schema is not None
        name = convert_to_openai_tool(schema)["function"]["name"]
        llm = model.bind_tools([schema], tool_choice="any", strict=strict, **options)
        if pydantic:
            parser = PydanticToolsParser(tools=[cast(Any, schema)], first_tool_only=True)
        else:
            parser = JsonOutputKeyToolsParser(key_name=name, first_tool_only=True)
        wanted = f"call of the {name!r} tool"
    else:
        response_format = (
            _json_schema_format(schema, strict)
            if method == "json_schema" and schema is not None
            else {"type": "json_object"}
        )
        llm = model.bind(response_format=response_format, **options)
        if pydantic:
            parser = PydanticOutputParser(pydantic_object=cast(Any, schema))
        else:
            parser = JsonOutputParser()
        wanted = "JSON answer"
    parsed = parser | _required(wanted)
    if not include_raw:
        return llm | parsed
    with_parsed = RunnablePassthrough.assign(
        parsed=itemgetter("raw") | parsed, parsing_error=lambda _: None
    )
    without = RunnablePassthrough.assign(parsed=lambda _: None)
    return RunnableMap(raw=llm) | with_parsed.with_fallbacks(
        [without], exception_key="parsing_error"
    )


def _json_schema_format(schema: dict[str, Any] | type, strict: bool | None) -> dict[str, Any]:
    """The OpenAI `response_format` asking for JSON that fits `schema`."""
    function = convert_to_openai_function(schema, strict=strict)
    json_schema: dict[str, Any] = {"name": function["name"], "schema": function["parameters"]}
    if function.get("description"):
        json_schema["description"] = function["description"]
    if strict is not None:
        json_schema["strict"] = strict
    return {"type": "json_schema", "json_schema": json_schema}


def _required(wanted: str) -> Runnable[Any, Any]:
    """Passes the parser's output through; raises if there was none (the chosen reply
    holds no `wanted`), so a missing answer is an error, not a None."""

    def missing() -> OutputParserException:
        return OutputParserException(f"the chosen reply holds no {wanted}")

    def check(values: Iterator[Any]) -> Iterator[Any]:
        seen = False
        for value in values:
            if value is not None:
                seen = True
                yield value
        if not seen:
            raise missing()

    async def acheck(values: AsyncIterator[Any]) -> AsyncIterator[Any]:
        seen = False
        async for value in values:
            if value is not None:
                seen = True
                yield value
        if not seen:
            raise missing()

    return RunnableGenerator(check, acheck, name="require_structured_output")

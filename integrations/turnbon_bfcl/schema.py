"""BFCL's function docs as OpenAI tool schemas, and tool calls as BFCL call strings.

Both mirror bfcl-eval's own code for OpenAI chat-completions models
(`model_handler.utils.convert_to_tool` with `ModelStyle.OPENAI_COMPLETIONS`, and
`convert_to_function_call`), which lives in a module that imports tree-sitter parsers
for Java and JavaScript; copying these few lines keeps those pins out of the set-up.
"""

from __future__ import annotations

import ast
import copy
import keyword
import re
from collections.abc import Mapping
from typing import Any


def openai_function(doc: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    """`{"name", "description", "parameters"}` as BFCL sends it to OpenAI models.

    BFCL also leaves the doc's `response` schema in the function object, a field the
    chat-completions API does not define; LangChain tools cannot carry it, so it is
    dropped here.
    """
    item = copy.deepcopy(dict(doc))
    name = re.sub(r"\.", "_", str(item["name"]))  # OpenAI names allow no dots
    parameters = item["parameters"]
    parameters["type"] = "object"
    parameters["properties"] = _cast_types(parameters["properties"], types)
    return {"name": name, "description": item["description"], "parameters": parameters}


def _cast_types(properties: dict[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    """BFCL's `_cast_to_openai_type`, step for step (floats become numbers with
    `format: float` and a note in the description; unknown types become strings)."""
    for value in properties.values():
        if "type" not in value:
            value["type"] = "string"
        else:
            kind = value["type"]
            if kind == "float":
                value["format"] = "float"
                value["description"] += " This is a float type value."
            value["type"] = types.get(kind, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_types(value["properties"], types)
            elif "items" in value:
                items = value["items"]
                items["type"] = types[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = types[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_types(items["properties"], types)
    return properties


def call_string(name: str, args: Mapping[str, Any]) -> str:
    """BFCL's string for one call: `cd(folder='document')`, arguments as Python literals
    in the order given (its `convert_to_function_call`)."""
    return f"{name}({','.join(f'{key}={value!r}' for key, value in args.items())})"


def unsafe_argument_names(args: Mapping[str, Any]) -> list[str]:
    """Argument names that are not plain identifiers.

    BFCL `eval`s call strings, and argument names are pasted in unquoted: a name a model
    made up could be code. Such a call could only have failed in BFCL, so it is refused.
    """
    return [k for k in args if not (str(k).isidentifier() and not keyword.iskeyword(k))]


def parse_call(text: str, positional: list[str] | None = None) -> tuple[str, dict[str, Any]]:
    """A ground-truth string back to (name, keyword arguments); positional arguments are
    named with `positional` (the backend method's parameter names)."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    args: dict[str, Any] = {}
    if node.args:
        names = positional or []
        if len(node.args) > len(names):
            raise ValueError(f"{text!r} has more positional arguments than {names}")
        for param, value in zip(names, node.args, strict=False):
            args[param] = ast.literal_eval(value)
    for item in node.keywords:
        if item.arg is None:
            raise ValueError(f"**kwargs are not supported: {text!r}")
        args[item.arg] = ast.literal_eval(item.value)
    return node.func.id, args

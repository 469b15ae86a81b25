r"""Text a request may carry: every string of a request body, keys included, must be text
that UTF-8 can encode. JSON can spell what UTF-8 cannot, a lone UTF-16 surrogate (`"\ud800"`:
half of a pair such as `"\ud83d\ude00"`, which is one character), and `json.loads` keeps
it as it is (as it does the same code point sent in UTF-8's form). Such a string fails
where it is first encoded, in the upstream call or in the answer, after the turn's calls
were made; `check_utf8` refuses it before, naming where it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

from turnbon_graph.errors import RequestFieldError

__all__ = ["check_utf8", "check_value"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_utf8(body: Mapping[str, Any]) -> None:
    """Raises `RequestFieldError` for the first string of a request `body`, a value or a
    key at any depth, that is not valid UTF-8 text, its `param` the top-level field it is
    in. Values other than JSON's (a LangChain message a Python caller passes) are not
    looked into."""
    for name, value in body.items():
        if _is_bad(name):
            _refuse(f"the field name '{_shown(name)}'", name, _shown(name))
        check_value(value, _shown(name), param=_shown(name))


def check_value(value: Any, path: str, *, param: str) -> None:
    """`check_utf8` for a value at `path` of a request, in field `param`: what a field
    holds as JSON text (a tool call's arguments), once read."""
    if _has_bad(value):
        _refuse(*_where(value, path), param)


def _refuse(where: str, text: str, param: str) -> NoReturn:
    surrogate = _shown(_SURROGATE.findall(text)[0])
    raise RequestFieldError(
        param,
        f"{where} is not valid UTF-8 text: it holds a lone UTF-16 surrogate, {surrogate}, "
        "which UTF-8 cannot encode; send the character itself, or both halves of its "
        'surrogate pair (JSON "\\ud83d\\ude00" is one character)',
    )


def _is_bad(text: object) -> bool:
    return isinstance(text, str) and not text.isascii() and _SURROGATE.search(text) is not None


def _has_bad(value: Any) -> bool:
    """Whether any string in `value` is bad: without paths, so the common case (none is)
    takes about 0.1 s for a 10 MB body of 90,000 messages."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _is_bad(item):
                return True
        elif isinstance(item, dict | Mapping):  # a dict first: isinstance of an ABC is slow
            if any(map(_is_bad, item)):
                return True
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _where(value: Any, path: str) -> tuple[str, str]:
    r"""Where in `value` (at `path`) its first bad string is, as `messages[0].content` (a
    key as `the key '\ud800' in messages[0]`), and that string. Without recursing: a
    Python caller's value may nest deeper than a request body can."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            if _is_bad(item):
                return at, item
        elif isinstance(item, dict | Mapping):
            for key in item:
                if _is_bad(key):
                    return f"the key '{_shown(key)}' in {at}", key
            stack.extend(
                (inner, f"{at}.{_shown(key)}") for key, inner in reversed(list(item.items()))
            )
        elif isinstance(item, list | tuple):
            stack.extend((inner, f"{at}[{i}]") for i, inner in reversed(list(enumerate(item))))
    raise AssertionError("_where is asked only where _has_bad found a bad string")


def _shown(text: Any) -> str:
    """`text` with any surrogate written as its escape, so that an error can carry it."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")

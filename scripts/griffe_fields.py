"""The API reference's parameter tables for data classes (mkdocs.yml loads this extension).

griffe-fieldz turns the fields of a pydantic model or a dataclass into the class's
parameter table, each described where it is declared (`Field(description=...)` or the
field's docstring), so no class repeats its fields in an `Args:` section. Two changes:
a TypedDict is left as it is (its keys are not a constructor's parameters: `TurnOptions`
points at `TurnConfig`, which describes each option; and their annotations read back as
`ForwardRef(...)`), and a field is never described by its default factory's docstring
(`default_factory=dict` would show `dict`'s), only by its own, and its default is what the
factory makes (`{}`, not `<class 'dict'>`). The table comes where an `Args:` section would,
before the docstring's other sections (`Raises:`, `Examples:`). A field's own docstring,
now in the table, is taken off its attribute, which the reference then does not show a
second time; the attribute stays, so a dataclass's signature still lists it (griffe builds
that signature from the attributes after this extension has run).
"""

from __future__ import annotations

from typing import Any

import fieldz
from griffe import (
    Class,
    DocstringSectionParameters,
    dynamic_import,
)
from griffe_fieldz import FieldzExtension
from typing_extensions import is_typeddict


class DataclassFields(FieldzExtension):
    """griffe-fieldz for pydantic models and dataclasses, described by their own fields."""

    def on_class_members(self, *, cls: Class, **kwargs: Any) -> None:
        """Add the fields of `cls` to its docstring's parameters, unless it is a TypedDict.

        Args:
            cls: the class griffe has just read, members included.
            **kwargs: what griffe passes every extension (the node, the visitor).
        """
        try:
            runtime = dynamic_import(cls.path)
            fields = fieldz.fields(runtime) if not is_typeddict(runtime) else None
        except (ImportError, TypeError):  # not importable, or not a data class
            fields = None
        if fields is None:
            return
        docs = {name: a.docstring.value for name, a in cls.attributes.items() if a.docstring}
        given = {entry.name for entry in _parameters(cls)}  # the docstring's own Args
        super().on_class_members(cls=cls, **kwargs)
        if cls.docstring is not None and not given:  # the table first, after the text
            parsed = cls.docstring.parsed
            tables = [s for s in parsed if isinstance(s, DocstringSectionParameters)]
            rest = [s for s in parsed if s not in tables]
            at = next((i for i, s in enumerate(rest) if s.kind.value != "text"), len(rest))
            parsed[:] = [*rest[:at], *tables, *rest[at:]]
        by_name = {f.name: f for f in fields}
        for entry in _parameters(cls):
            field = by_name.get(entry.name)
            if field is None:
                continue
            if entry.name not in given and not (
                field.description or field.metadata.get("description")
            ):
                entry.description = docs.get(entry.name, "")
            if field.default_factory is not field.MISSING:
                entry.value = _made_by(field.default_factory)
            if (attribute := cls.attributes.get(entry.name)) is not None:
                attribute.docstring = None  # shown in the table: not again below it


def _made_by(factory: Any) -> str:
    """What a default factory makes, as its repr (`<dynamic>` if it cannot be made)."""
    try:
        return repr(factory())
    except Exception:  # a factory that needs arguments or state: not shown
        return "<dynamic>"


def _parameters(cls: Class) -> list[Any]:
    """The entries of `cls`'s docstring's parameters section(s)."""
    if cls.docstring is None:
        return []
    return [
        entry
        for section in cls.docstring.parsed
        if isinstance(section, DocstringSectionParameters)
        for entry in section.value
    ]

"""The API reference's parameter tables for data classes (mkdocs.yml loads this extension).

griffe-fieldz turns the fields of a pydantic model or a dataclass into the class's
parameter table, each described where it is declared (`Field(description=...)` or the
field's docstring), so no class repeats its fields in an `Args:` section. A TypedDict is
left as it is: its keys are not a constructor's parameters (`TurnOptions` points at
`TurnConfig`, which describes each option), and their annotations read back as
`ForwardRef(...)`.
"""

from __future__ import annotations

from typing import Any

from griffe import Class, dynamic_import
from griffe_fieldz import FieldzExtension
from typing_extensions import is_typeddict


class DataclassFields(FieldzExtension):
    """griffe-fieldz for pydantic models and dataclasses, not TypedDicts."""

    def on_class_members(self, *, cls: Class, **kwargs: Any) -> None:
        """Add the fields of `cls` to its docstring's parameters, unless it is a TypedDict.

        Args:
            cls: the class griffe has just read, members included.
            **kwargs: what griffe passes every extension (the node, the visitor).
        """
        try:
            if is_typeddict(dynamic_import(cls.path)):
                return
        except ImportError:
            return
        super().on_class_members(cls=cls, **kwargs)

"""The API reference has a parameter table for everything it shows.

Everything docs/api/*.md renders (each `::: name`, and the public members mkdocstrings
shows under it) is read as mkdocstrings reads it: by griffe, from the source, with the
options and extensions of mkdocs.yml, as Google-style docstrings. Every function and
method documents each of its parameters (`Args:`) and, when it returns something, what
(`Returns:` or `Yields:`); every class documents its constructor's parameters, in its
docstring or, for a pydantic model or dataclass, where each field is declared; every
public method of a shown class has a docstring, so that it is shown at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typing_extensions import is_typeddict

from turnbon_graph.config import TurnConfig

griffe = pytest.importorskip("griffe", reason="the docs extra (mkdocstrings) reads docstrings")
fieldz = pytest.importorskip("fieldz", reason="the docs extra (griffe-fieldz) reads fields")

ROOT = Path(__file__).resolve().parents[2]
# What a return annotation that returns nothing reads as.
NOTHING = {"None", "NoReturn", "Never"}
# Annotations under which a function yields rather than returns.
YIELDING = re.compile(r"^(Async)?(Iterator|Generator|Iterable)\b")


def handler_options() -> dict[str, Any]:
    """The python handler's section of mkdocs.yml (paths, options)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            handler: dict[str, Any] = plugin["mkdocstrings"]["handlers"]["python"]
            return handler
    raise AssertionError("mkdocs.yml has no mkdocstrings plugin")


def reference_targets() -> list[str]:
    """The names the API reference pages render, in page order."""
    return [
        name
        for page in sorted((ROOT / "docs" / "api").glob("*.md"))
        for name in re.findall(r"^::: (\S+)", page.read_text(encoding="utf-8"), re.M)
    ]


def project_path(extension: str) -> str:
    """An extension given as a file of the project, made absolute (mkdocs runs from the
    project's root, the tests may not)."""
    return str(ROOT / extension) if ".py:" in extension else extension


def load() -> Any:
    """griffe's view of the packages the reference renders, as mkdocstrings loads them."""
    handler = handler_options()
    options = handler["options"]
    extensions = []
    for extension in options.get("extensions", []):
        if isinstance(extension, dict):  # with options
            (path, settings), *_ = extension.items()
            extensions.append({project_path(path): settings})
        else:
            extensions.append(project_path(extension))
    loader = griffe.GriffeLoader(
        search_paths=[str(ROOT / path) for path in handler["paths"]],
        extensions=griffe.load_extensions(*extensions),
        docstring_parser=griffe.Parser(options["docstring_style"]),
    )
    for package in sorted({name.split(".")[0] for name in reference_targets()}):
        loader.load(package)
    loader.resolve_aliases(implicit=True, external=False)
    return loader


LOADER = load()


def shown(obj: Any) -> Iterator[Any]:
    """`obj` and the members mkdocstrings shows under it: a module's public functions
    and classes, a class's own public methods (inherited ones are documented where they
    are defined)."""
    obj = obj.final_target if obj.is_alias else obj
    yield obj
    if obj.is_module:
        for member in obj.members.values():
            if member.is_public and not member.name.startswith("_"):
                target = member.final_target if member.is_alias else member
                if target.is_function or target.is_class:
                    yield from shown(member)
    elif obj.is_class:
        for member in obj.members.values():
            if member.is_function and not member.name.startswith("_"):
                yield member


def objects() -> list[Any]:
    found: dict[str, Any] = {}
    for name in reference_targets():
        for obj in shown(LOADER.modules_collection[name]):
            found.setdefault(obj.path, obj)
    return list(found.values())


OBJECTS = objects()


def sections(obj: Any) -> dict[str, list[Any]]:
    parsed: dict[str, list[Any]] = {}
    for section in obj.docstring.parsed if obj.docstring else []:
        parsed.setdefault(section.kind.value, []).extend(
            section.value if isinstance(section.value, list) else [section.value]
        )
    return parsed


def parameters(function: Any) -> list[str]:
    return [p.name for p in function.parameters if p.name not in ("self", "cls")]


def constructor_parameters(cls: Any) -> list[str]:
    """What a class is made with: the fields of a pydantic model or dataclass (its own,
    as its table lists them), and the parameters of an `__init__` written in it."""
    names = []
    runtime = griffe.dynamic_import(cls.path)
    if not is_typeddict(runtime):
        try:
            fields = fieldz.fields(runtime)
        except TypeError:  # not a data class
            fields = ()
        own = getattr(runtime, "__annotations__", {})
        names = [f.name for f in fields if f.init and f.name in own and f.name[0] != "_"]
    init = cls.members.get("__init__")
    if init is not None and init.is_function and init.lineno:  # written, not synthesised
        names += [name for name in parameters(init) if name not in names]
    return names


def undocumented(names: list[str], documented: list[Any]) -> list[str]:
    """The names in `names` without a described entry in `documented`."""
    described = {entry.name.lstrip("*") for entry in documented if entry.description.strip()}
    return [name for name in names if name not in described]


def problems_of(obj: Any) -> list[str]:
    if not obj.docstring:
        return ["no docstring: the reference does not show it"]
    parsed = sections(obj)
    problems = []
    if obj.is_class:
        documented = parsed.get("parameters", [])
        init = obj.members.get("__init__")
        if init is not None and init.is_function:
            documented = documented + sections(init).get("parameters", [])
        if missing := undocumented(constructor_parameters(obj), documented):
            problems.append(f"constructor parameters or fields without a description: {missing}")
    elif obj.is_function and "property" not in obj.labels:
        if missing := undocumented(parameters(obj), parsed.get("parameters", [])):
            problems.append(f"parameters without an Args entry: {missing}")
        returns = str(obj.returns) if obj.returns is not None else "None"
        if obj.name != "__init__" and returns not in NOTHING:
            wanted = "yields" if YIELDING.match(returns) else None
            if "returns" not in parsed and (wanted is None or wanted not in parsed):
                problems.append(f"returns {returns} without a Returns section")
    return problems


def test_the_reference_renders_objects() -> None:
    assert len(OBJECTS) > 150
    assert {"turnbon_graph.graph.create_turnbon_graph", "turnbon_graph.config.TurnConfig"} <= {
        obj.path for obj in OBJECTS
    }


@pytest.mark.parametrize("obj", OBJECTS, ids=[obj.path for obj in OBJECTS])
def test_the_object_documents_its_parameters_and_what_it_returns(obj: Any) -> None:
    assert problems_of(obj) == []


def test_a_data_class_table_describes_each_field() -> None:
    """TurnConfig's table comes from its fields' descriptions, declared once."""
    config = LOADER.modules_collection["turnbon_graph.config.TurnConfig"]
    table = {entry.name: entry.description for entry in sections(config)["parameters"]}
    assert set(table) == set(TurnConfig.model_fields)
    assert table["n"] == TurnConfig.model_fields["n"].description


def test_a_typed_dict_gets_no_table() -> None:
    """TurnOptions' keys are TurnConfig's options, described there."""
    assert "parameters" not in sections(LOADER.modules_collection["turnbon_graph.TurnOptions"])

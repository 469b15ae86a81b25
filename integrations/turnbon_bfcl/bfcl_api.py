"""The only module that touches `bfcl_eval`: its data, its backends, its checker.

bfcl-eval is imported lazily (through `importlib`, so the rest of the integration stays
typed without stubs) and only its multi-turn parts, whose imports are light: its
declared dependencies are heavy exact pins for model clients we never use.

BFCL caches backend instances in the module globals of its `multi_turn_utils`, keyed by
model name and test id, so two runs of the same entry under one name share state. Every
caller here passes a fresh *namespace* as the model name and `purge`s it afterwards.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from turnbon_bfcl.errors import BFCLNotInstalledError
from turnbon_graph.errors import ConfigurationError

Entry = dict[str, Any]
"""One BFCL test entry as `bfcl_eval.utils.load_dataset_entry` returns it."""

_UTILS = "bfcl_eval.utils"
_EXECUTION = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
_CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
_BACKENDS = "bfcl_eval.constants.executable_backend_config"
_TYPES = "bfcl_eval.constants.type_mappings"
_PROMPTS = "bfcl_eval.constants.default_prompts"


def _default_project_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "turnbon" / "bfcl"


def _module(name: str) -> ModuleType:
    # bfcl-eval creates result/, score/ and .file_locks/ under BFCL_PROJECT_ROOT when
    # imported, by default inside site-packages: point it at a cache folder unless set.
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(_default_project_root()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise BFCLNotInstalledError(exc.name or name) from exc
    except OSError as exc:
        raise ConfigurationError(
            f"bfcl-eval could not create its folders ({exc}); set BFCL_PROJECT_ROOT to a "
            "writable folder"
        ) from exc


def max_steps_per_turn() -> int:
    """BFCL's MAXIMUM_STEP_LIMIT: a user turn with more model steps is force-terminated."""
    return int(_module(_PROMPTS).MAXIMUM_STEP_LIMIT)


def type_map() -> dict[str, str]:
    """BFCL's GORILLA_TO_OPENAPI: its parameter types as JSON-schema types."""
    return dict(_module(_TYPES).GORILLA_TO_OPENAPI)


def load_entries(category: str) -> list[Entry]:
    """BFCL's own loader: questions, initial configs, and the function docs per entry."""
    return list(_module(_UTILS).load_dataset_entry(category))


def load_ground_truth(category: str) -> dict[str, list[list[str]]]:
    """Ground-truth calls per entry id, per user turn, in BFCL's string format."""
    rows = _module(_UTILS).load_ground_truth_entry(category)
    return {str(row["id"]): [list(turn) for turn in row["ground_truth"]] for row in rows}


def new_namespace() -> str:
    """A model name no other episode or check uses, so BFCL's cache never hits."""
    return f"turnbon_bfcl_{uuid.uuid4().hex}"


def import_backends(entry: Entry) -> None:
    """Imports the entry's backend modules now, so a missing dependency (mpmath for
    MathAPI) is reported when the episode starts, with the set-up command."""
    mapping = _module(_BACKENDS).CLASS_FILE_PATH_MAPPING
    for class_name in entry["involved_classes"]:
        _module(mapping[class_name])


def execute(calls: Sequence[str], entry: Entry, namespace: str) -> tuple[list[str], dict[str, Any]]:
    """Runs calls in order on the namespace's backend instances (created on first use,
    loaded with a copy of the entry's initial_config); returns BFCL's result strings and
    the instances by class name."""
    results, instances = _module(_EXECUTION).execute_multi_turn_func_call(
        func_call_list=list(calls),
        initial_config=entry["initial_config"],
        involved_classes=entry["involved_classes"],
        model_name=namespace,
        test_entry_id=entry["id"],
        long_context=False,  # only multi_turn_base is supported
        is_evaL_run=False,
    )
    return [str(r) for r in results], dict(instances)


def check(
    calls: list[list[list[str]]],
    ground_truth: list[list[str]],
    entry: Entry,
    category: str,
) -> dict[str, Any]:
    """BFCL's `multi_turn_checker` on the executed calls (per turn, per step) under a
    fresh namespace, purged afterwards: it replays both sides from the initial config."""
    namespace = new_namespace()
    try:
        result = _module(_CHECKER).multi_turn_checker(
            calls, ground_truth, copy.deepcopy(entry), category, namespace
        )
        return dict(result)
    finally:
        purge(namespace)


def purge(namespace: str) -> int:
    """Drops the namespace's cached instances from BFCL's module globals; returns how many."""
    cache = vars(_module(_EXECUTION))
    stale = [key for key in cache if key.startswith(f"{namespace}_")]
    for key in stale:
        del cache[key]
    return len(stale)


def cached_instances(namespace: str) -> list[str]:
    """The keys BFCL's cache holds for a namespace (for tests and debugging)."""
    return [key for key in vars(_module(_EXECUTION)) if key.startswith(f"{namespace}_")]


def parameter_names(entry: Entry, function: str) -> list[str]:
    """The backend method's parameters in order, to name positional ground-truth args."""
    mapping = _module(_BACKENDS).CLASS_FILE_PATH_MAPPING
    for class_name in entry["involved_classes"]:
        backend = getattr(_module(mapping[class_name]), class_name)
        method = getattr(backend, function, None)
        if method is not None and not function.startswith("_"):
            return [p for p in inspect.signature(method).parameters if p != "self"]
    raise ConfigurationError(
        f"{entry['id']}: no backend of {entry['involved_classes']} has a method {function!r}"
    )

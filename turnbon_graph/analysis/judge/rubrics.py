"""The judge's rubrics: yes/no questions about a trajectory, loaded from YAML.

`rubrics.yaml` in `turnbon_graph.analysis` (where pyproject's package-data puts it)
ships the paper's; users extend or override them by id with their own files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnbon_graph.analysis.trajectories import Trajectory
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.prompting import first_error

__all__ = [
    "RUBRICS_FILE",
    "AppliesTo",
    "Rubric",
    "RubricError",
    "RubricSource",
    "check_unique",
    "load_rubrics",
]

RUBRICS_FILE = "rubrics.yaml"

AppliesTo = Literal["all", "passed"]


class RubricError(ConfigurationError):
    """A rubric file is unreadable or one of its entries is invalid."""


class Rubric(BaseModel):
    """One yes/no question the judge answers about a whole trajectory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """The rubric's name (letters, digits, `_`, `.`, `-`): what the verdicts and a later
    file's entries refer to."""
    title: str = Field(min_length=1)
    """The row label in the tables."""
    question: str = Field(min_length=1)
    """The definition the judge receives."""
    applies_to: AppliesTo = "all"
    """Which attempts are judged: "all", or "passed" only (reward hacking)."""
    source: str = "user"
    """Where it comes from (the paper's table, or "user")."""
    note: str = ""
    """Why it is here, for readers; the judge does not see it."""
    enabled: bool = True
    """False drops it (in a later file: drops the entry of that id)."""
    verifier_evidence: bool = False
    """Show the judge the verifier's tamper evidence on the attempt with this question
    (`EpisodeResult.tamper`; reward hacking)."""

    def applies(self, trajectory: Trajectory) -> bool:
        """Whether the judge is asked this question about `trajectory`.

        Args:
            trajectory: one attempt.

        Returns:
            True for "all", or for a passed attempt with "passed".
        """
        return self.applies_to == "all" or trajectory.result.passed


RubricSource = str | Path | Rubric


def load_rubrics(
    path: str | Path | None = None,
    *,
    extra: RubricSource | Sequence[RubricSource] | None = None,
) -> list[Rubric]:
    """The enabled rubrics of `path` (None: the shipped `rubrics.yaml`), then each of
    `extra` (YAML files or `Rubric`s) applied in order: an entry whose id exists replaces
    only the fields it gives, a new id is added at the end, `enabled: false` drops one.

    A file holds `rubrics: [...]` (or just the list).

    Args:
        path: a YAML rubric file; None: the shipped `rubrics.yaml`.
        extra: YAML files or `Rubric`s applied after it, in order.

    Returns:
        The enabled rubrics.

    Raises:
        RubricError: a file cannot be read or an entry is invalid (the file and the
            entry are named).
    """
    base = _shipped_rubrics() if path is None else _read_rubric_file(Path(path))
    merged: dict[str, dict[str, Any]] = {}
    _merge(merged, base, where=str(path) if path is not None else f"shipped {RUBRICS_FILE}")
    if extra is None:
        extras: Sequence[RubricSource] = []
    elif isinstance(extra, str | Path | Rubric):
        extras = [extra]
    else:
        extras = extra
    for item in extras:
        if isinstance(item, Rubric):
            _merge(merged, [item.model_dump()], where=f"Rubric({item.id!r})")
        else:
            _merge(merged, _read_rubric_file(Path(item)), where=str(item))
    return [Rubric.model_validate(entry) for entry in merged.values() if entry.get("enabled", True)]


def _shipped_rubrics() -> list[dict[str, Any]]:
    text = resources.files("turnbon_graph.analysis").joinpath(RUBRICS_FILE).read_text("utf-8")
    return _parse_rubric_text(text, f"shipped {RUBRICS_FILE}")


def _read_rubric_file(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"cannot read rubric file {path}: {exc.strerror or exc}") from exc
    return _parse_rubric_text(text, str(path))


def _parse_rubric_text(text: str, where: str) -> list[dict[str, Any]]:
    # pyyaml ships no type hints (types-PyYAML is not a dependency).
    import yaml  # type: ignore[import-untyped, unused-ignore]

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RubricError(f"{where} is not valid YAML: {exc}") from exc
    if isinstance(data, Mapping):
        data = data.get("rubrics")
    if not isinstance(data, list):
        raise RubricError(
            f"{where} must hold a list of rubrics under the key `rubrics:` "
            "(each with id, title and question)"
        )
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, entry in enumerate(data, start=1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            raise RubricError(
                f"{where}: rubric #{i} must be a mapping with a string `id`, got {entry!r}"
            )
        if entry["id"] in seen:
            raise RubricError(f"{where}: rubric #{i} repeats the id {entry['id']!r}")
        seen.add(entry["id"])
        entries.append(dict(entry))
    return entries


def _merge(merged: dict[str, dict[str, Any]], entries: list[dict[str, Any]], where: str) -> None:
    for i, entry in enumerate(entries, start=1):
        rid = entry["id"]
        # A partial entry overrides only the fields it names; validate the result.
        candidate = {**merged.get(rid, {}), **entry}
        try:
            merged[rid] = Rubric.model_validate(candidate).model_dump()
        except ValidationError as exc:
            fix = (
                "an override may only change the fields of the shipped rubric"
                if rid in merged
                else "a new rubric needs id, title and question"
            )
            raise RubricError(
                f"{where}: rubric #{i} ({rid!r}) is invalid: {first_error(exc)} ({fix}; "
                "fields: id, title, question, applies_to (all|passed), source, note, enabled, "
                "verifier_evidence)"
            ) from None


def check_unique(rubrics: Sequence[Rubric]) -> None:
    """Refuses rubrics whose ids repeat (`ConfigurationError` naming them)."""
    ids = [r.id for r in rubrics]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigurationError(f"rubric ids must be unique; repeated: {', '.join(repeated)}")

"""A run's cost estimates on disk: `estimates.json` in the run folder, one `Estimates` a
setting (by its label), rewritten after each episode. A resumed run plans on what the
interrupted one learned, Ray workers start from it, and `turnbon bench --estimates FILE`
freezes a pilot run's for a new run (copied into its folder), so that no setting's spend
depends on the order in which its episodes finish."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from turnbon_graph.bench.metering.budget import Estimates
from turnbon_graph.errors import ConfigurationError

ESTIMATES_FILE = "estimates.json"
_TABLE = TypeAdapter(dict[str, Estimates])


def dump_estimates(estimates: Mapping[str, Estimates]) -> str:
    """The estimates as the file holds them (made on the event loop, where they change,
    so that a thread writes a finished text)."""
    return json.dumps(_TABLE.dump_python(dict(estimates), mode="json"))


def write_estimates(path: Path, text: str) -> None:
    """Writes `text` to `path` whole or not at all (a temporary file, then a rename)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def read_estimates(path: Path) -> dict[str, Estimates]:
    """The estimates of the file at `path`.

    Raises:
        ConfigurationError: the file is missing or is no estimates file.
    """
    try:
        return _TABLE.validate_json(path.read_bytes())
    except FileNotFoundError:
        raise ConfigurationError(
            f"{path} does not exist: pass the {ESTIMATES_FILE} of an earlier run's folder"
        ) from None
    except ValidationError as exc:
        raise ConfigurationError(
            f"{path} is not a cost estimates file ({exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']}); pass the {ESTIMATES_FILE} that `turnbon bench` "
            "wrote into a run folder"
        ) from None


def frozen_for(
    pilot: Mapping[str, Estimates], names: Mapping[str, Sequence[str]]
) -> dict[str, Estimates]:
    """The pilot's estimates of each setting, frozen, under the setting's label.

    Args:
        pilot: the pilot run's estimates by its labels.
        names: each setting's label, with the labels it may have had in the pilot (a
            label carries its budget only in a run of several budgets).

    Raises:
        ConfigurationError: the pilot has none for one of the settings.
    """
    found = {label: next((n for n in known if n in pilot), None) for label, known in names.items()}
    missing = [label for label, name in found.items() if name is None]
    if missing:
        raise ConfigurationError(
            f"the estimates file has no estimates for {', '.join(map(repr, missing))} (it "
            f"has {', '.join(map(repr, sorted(pilot))) or 'none'}): run a pilot with the "
            "same settings (fewer tasks will do), and pass its estimates.json"
        )
    return {
        label: Estimates(**{**vars(pilot[name]), "frozen": True})
        for label, name in found.items()
        if name is not None
    }

"""Prints the README's options table from `TurnConfig`, the one place options are declared.

    python scripts/options_table.py      # paste under "### Options" in README.md

`tests/unit_tests/test_config.py` checks that the README holds exactly this table.
"""

from __future__ import annotations

from turnbon_graph.config import TurnConfig


def options_table() -> str:
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for name, field in TurnConfig.model_fields.items():
        lines.append(f"| `{name}` | `{field.default!r}` | {field.description} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(options_table())

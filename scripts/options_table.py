"""Prints the options table of docs/options.md from `TurnConfig`, the one place options
are declared.

    python scripts/options_table.py      # paste as the table of docs/options.md

`tests/unit_tests/test_config.py` checks that docs/options.md holds exactly this table.
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

"""`turnbon images`: the images the terminal environment built from tasks' Dockerfiles,
listed, and removed with `turnbon images prune` (a `turnbon.commands` entry point: the
`turnbon` command hands it its arguments when this package is installed)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from turnbon_terminal.container.built import list_built, prune_built
from turnbon_terminal.container.engine import Engine


def main(argv: Sequence[str] | None = None) -> int:
    """`turnbon images [list|prune [KEY...]]`; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="turnbon images",
        description=(
            "Container tasks' images are built once, keyed by their build context and "
            "bases, and kept for later episodes and runs. `turnbon images` lists them; "
            "`turnbon images prune` removes them (an image a running container uses stays)."
        ),
    )
    parser.add_argument("action", nargs="?", choices=("list", "prune"), default="list")
    parser.add_argument(
        "keys",
        nargs="*",
        metavar="KEY",
        help="with prune: only the images of these keys (the 16 hex digits after "
        "turnbon-task-; default: all)",
    )
    parser.add_argument(
        "--engine", choices=("podman", "docker"), help="default: $TURNBON_ENGINE, else found"
    )
    args = parser.parse_args(argv)
    if args.keys and args.action != "prune":
        parser.error("image keys go with prune: turnbon images prune KEY ...")
    engine = Engine.find(args.engine)  # not there: an error `turnbon` reports in one line
    if args.action == "prune":
        removed, kept = asyncio.run(prune_built(engine, args.keys))
        print(f"Removed {len(removed)} image(s) built from task Dockerfiles")
        for name in kept:
            print(f"  kept {name}: a container uses it")
        return 0
    images = asyncio.run(list_built(engine))
    if not images:
        print("No images built from task Dockerfiles")
    for line in images:
        print(line)
    return 0

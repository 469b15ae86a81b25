"""How long a container episode takes to start when its image is built once and kept,
against the first start (the build) and against an image built per episode.

Copies the test task `tests/tb2_tasks/apt-jq` (its Dockerfile installs jq with apt, as
most Terminal-Bench 2 tasks install something) with a fresh first step in its
Dockerfile, so its image key is new and no layer is cached (the first build runs apt
from the Debian mirror), then times `start()` of: the first episode (the apt build),
`--runs` later episodes with the image kept (the default), and `--runs` episodes with
`keep_images=False` on a second fresh copy after its first build (each builds and
removes its own tag, the engine's layer cache sparing what it still holds). The image
is pruned at the end. Ratios are of medians measured in this one run.

    python benchmarks/image_reuse.py            # 3 episodes each
    python benchmarks/image_reuse.py --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from turnbon_terminal import TerminalEnvironment
from turnbon_terminal.container.built import prune_built
from turnbon_terminal.container.images import IMAGE_PREFIX

TASK = Path(__file__).resolve().parents[1] / "tests" / "tb2_tasks" / "apt-jq"


async def started(env: TerminalEnvironment, trial: int) -> tuple[float, str]:
    """Seconds to start an episode (closed after), and its image."""
    began = time.monotonic()
    episode = await env.start(env.tasks()[0], trial)
    took = time.monotonic() - began
    image = episode.container.image.name  # type: ignore[attr-defined]
    await episode.close()
    return took, image


async def measure(runs: int, kept_task: Path, own_task: Path) -> dict[str, list[float]]:
    kept = TerminalEnvironment(kept_task)
    first, image = await started(kept, 0)
    times = {"first (build)": [first], "kept": [], "per episode": []}
    for trial in range(runs):
        times["kept"].append((await started(kept, trial + 1))[0])
    own = TerminalEnvironment(own_task, keep_images=False)  # a context of its own
    await started(own, 0)  # its first build, cold as the kept one's was
    for trial in range(runs):
        times["per episode"].append((await started(own, trial + 1))[0])
    key = image.removeprefix(IMAGE_PREFIX).partition(":")[0]
    await prune_built(kept.containers.engine, [key])
    return times


def fresh_copy(folder: Path) -> Path:
    """The task copied into `folder` with a first build step no cache holds."""
    shutil.copytree(TASK, folder)
    dockerfile = folder / "environment" / "Dockerfile"
    base, _, rest = dockerfile.read_text().partition("\nRUN ")
    dockerfile.write_text(f"{base}\nRUN echo {uuid.uuid4().hex} > /fresh\nRUN {rest}")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kept, own = fresh_copy(Path(tmp, "kept")), fresh_copy(Path(tmp, "own"))
        times = asyncio.run(measure(max(args.runs, 1), kept, own))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(
            f"{name:>14}: median {medians[name]:.2f} s "
            f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} start(s))"
        )
    print(f"kept / first: {medians['kept'] / medians['first (build)']:.2f}")
    print(f"kept / per episode: {medians['kept'] / medians['per episode']:.2f}")


if __name__ == "__main__":
    main()

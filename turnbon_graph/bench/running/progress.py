"""The run's progress bar: episodes done, with the pass rate and tokens so far."""

from __future__ import annotations

from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.records import Usage


class Progress:
    """tqdm bar with the pass rate and tokens so far in its postfix."""

    def __init__(self, total: int, enabled: bool) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, unit="episode", disable=not enabled, dynamic_ncols=True)
        self._passed = 0
        self._done = 0
        self._tokens = Usage()

    def update(self, result: EpisodeResult) -> None:
        self._done += 1
        self._passed += result.passed
        self._tokens = self._tokens + result.usage.total
        self._bar.set_postfix(
            pass_rate=f"{self._passed / self._done:.0%}", tokens=self._tokens.total_tokens
        )
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()

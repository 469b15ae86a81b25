"""Selector constructors refuse bad options at once, before any model call."""

from __future__ import annotations

import pytest

from turnbon_graph import ConfigurationError
from turnbon_graph.selectors import (
    EnsembleSelector,
    LLMSelector,
    ScoringSelector,
    TournamentSelector,
)


def test_scoring_needs_exactly_one_source_of_scores() -> None:
    with pytest.raises(ConfigurationError, match="exactly one of judge"):
        ScoringSelector()
    with pytest.raises(ConfigurationError, match="exactly one of judge"):
        ScoringSelector("openai/judge", reward=lambda m, c: 1.0)
    with pytest.raises(ConfigurationError, match="takes neither"):
        ScoringSelector(reward=lambda m, c: 1.0, rubric="be good")


def test_tournament_options_go_to_one_place() -> None:
    judge = LLMSelector("openai/judge")
    assert TournamentSelector(judge).judge is judge
    with pytest.raises(ConfigurationError, match="set completion_kwargs"):
        TournamentSelector(judge, allow_none=True)
    with pytest.raises(ConfigurationError, match="LiteLLM model id"):
        TournamentSelector("")


def test_ensemble_needs_a_judge_and_a_positive_k() -> None:
    with pytest.raises(ConfigurationError, match="k must be"):
        EnsembleSelector("openai/judge", k=0)
    with pytest.raises(ConfigurationError, match="at least one judge"):
        EnsembleSelector([])

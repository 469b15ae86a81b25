"""Selectors: given the transcript and N candidate actions, choose the one to execute."""

from turnbon_graph.selectors.base import Selection, Selector
from turnbon_graph.selectors.ensemble import EnsembleSelector
from turnbon_graph.selectors.fusion import FusionSelector
from turnbon_graph.selectors.human import HumanSelector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.selectors.refine import RefineSelector
from turnbon_graph.selectors.scoring import ScoringSelector
from turnbon_graph.selectors.simple import FirstSelector, MajorityVoteSelector, RandomSelector
from turnbon_graph.selectors.tournament import TournamentSelector

__all__ = [
    "EnsembleSelector",
    "FirstSelector",
    "FusionSelector",
    "HumanSelector",
    "LLMSelector",
    "MajorityVoteSelector",
    "RandomSelector",
    "RefineSelector",
    "ScoringSelector",
    "Selection",
    "Selector",
    "TournamentSelector",
]

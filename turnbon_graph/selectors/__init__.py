"""Selectors: given the transcript and N candidate actions, choose the one to execute."""

from turnbon_graph.selectors.base import Selection, Selector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.selectors.simple import FirstSelector, MajorityVoteSelector, RandomSelector

__all__ = [
    "FirstSelector",
    "LLMSelector",
    "MajorityVoteSelector",
    "RandomSelector",
    "Selection",
    "Selector",
]

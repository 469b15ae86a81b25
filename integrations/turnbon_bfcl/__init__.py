"""BFCL v4 multi-turn (Berkeley Function-Calling Leaderboard) as a turnbon environment.

`BFCLEnvironment` runs BFCL's own multi_turn_base entries on BFCL's own Python backends
(file system, messaging, trading, travel, vehicle, ...), exposed as LangChain tools with
BFCL's function docs, and scores each episode with BFCL's own multi-turn checker.
Needs bfcl-eval: `make setup-bfcl`.
"""

from turnbon_bfcl.environment import BFCLEnvironment, environment
from turnbon_bfcl.episode import BFCLEpisode
from turnbon_bfcl.errors import BFCLNotInstalledError
from turnbon_bfcl.replay import GroundTruthReplay

__all__ = [
    "BFCLEnvironment",
    "BFCLEpisode",
    "BFCLNotInstalledError",
    "GroundTruthReplay",
    "environment",
]

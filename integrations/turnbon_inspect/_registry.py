"""What Inspect loads from the `inspect_ai` entry point: importing the agents registers
them as `turnbon_inspect/turn_bon` and `turnbon_inspect/turn_bon_agent`."""

from turnbon_inspect.agent import turn_bon, turn_bon_agent

__all__ = ["turn_bon", "turn_bon_agent"]

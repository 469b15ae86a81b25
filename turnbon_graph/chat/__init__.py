"""`ChatTurnBoN`: Turn-BoN as a LangChain chat model, for anything that takes one.

`model` holds the chat model; each of its parts is a module of its own: `streaming`
(the chosen message replayed as chunks), `structured` (`with_structured_output`), `usage`
(what a call cost, booked per model) and `events` (a turn's progress as callback and
stream events, named `EVENT_NAME`).
"""

from turnbon_graph.chat.model import EVENT_NAME, ChatTurnBoN

__all__ = ["EVENT_NAME", "ChatTurnBoN"]

"""Calling LiteLLM: private to the package.

`client` makes the calls within a turn's limits (`LiteLLMClient`, public as
`turnbon_graph.LiteLLMClient`), `loading` imports LiteLLM once and off the event loop,
`price_map` keeps it to its bundled prices (chosen when `turnbon_graph` is imported),
`failures` says how a call failed, `model_map` what LiteLLM's model map says of a model,
`quiet` skips LiteLLM's per-call logging where nobody listens, and `chat_model` puts a
LangChain chat model in LiteLLM's place for a selector that speaks through one.
"""

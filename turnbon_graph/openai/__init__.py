"""The OpenAI wire formats, both ways, shared by the LiteLLM provider and `turnbon serve`.

`fields` declares what a request may carry and checks each value, `text` refuses strings
that are not valid UTF-8, `messages` converts messages and tools between LangChain and
OpenAI, `chat` reads a chat-completions request and writes its answer, and `responses`
does the same for the Responses API. No LiteLLM is imported here but by `responses`,
whose translation is LiteLLM's own.
"""

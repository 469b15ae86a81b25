// The Vercel AI SDK's Responses model (@ai-sdk/openai's openai.responses), with its
// defaults, streaming a tool-calling conversation from turnbon serve, then a follow-up
// question on the messages it returned (its assistant text goes back as an
// item_reference to the server's stored item). Run by
// tests/integration_tests/test_harness_responses_clients.py: node stream_chain.mjs BASE_URL
// prints one JSON line of what the client saw.
import { createOpenAI } from "@ai-sdk/openai";
import { stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const openai = createOpenAI({ baseURL: process.argv[2], apiKey: "none" });
const model = openai.responses("turnbon");
const tools = {
  get_weather: tool({
    description: "The current weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `${city}: 21 C, sunny`,
  }),
};

async function turn(messages) {
  const result = streamText({ model, tools, messages, stopWhen: stepCountIs(5) });
  const deltas = [];
  const calls = [];
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") deltas.push(part.text);
    if (part.type === "tool-call") calls.push(part.input);
    if (part.type === "error") throw part.error;
  }
  const response = await result.response;
  return {
    text: deltas.join(""),
    calls,
    tokens: (await result.totalUsage).totalTokens,
    messages: response.messages,
  };
}

const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const first = await turn(messages);
messages.push(...first.messages, { role: "user", content: "And tomorrow?" });
const second = await turn(messages);
console.log(
  JSON.stringify({
    texts: [first.text, second.text],
    calls: [...first.calls, ...second.calls],
    tokens: [first.tokens, second.tokens],
  }),
);

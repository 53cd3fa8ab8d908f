// The official OpenAI client for Node against a running kvlab server
// (KVLAB_URL, e.g. http://127.0.0.1:8000). run.sh starts the server with
// --prefix-caching, so a repeated prompt must report cached tokens.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = (process.env.KVLAB_URL ?? "http://127.0.0.1:8000") + "/v1";
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120_000 });

// A system prompt long enough to fill several KV blocks.
const system = "You are a careful assistant. ".repeat(20);

async function modelID() {
  const models = await client.models.list();
  assert.ok(models.data.length >= 1, "the server lists its model");
  return models.data[0].id;
}

test("streamed chat completion, then the same prefix again is cached", async () => {
  const model = await modelID();
  const ask = async (question) => {
    const stream = await client.chat.completions.create({
      model,
      messages: [
        { role: "system", content: system },
        { role: "user", content: question },
      ],
      max_tokens: 8,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta?.content ?? "";
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(usage, "the last chunk carries usage");
    assert.ok(["length", "stop"].includes(finish), `finish_reason ${finish}`);
    return { text, usage };
  };
  const first = await ask("What is a KV cache?");
  assert.ok(first.usage.prompt_tokens > 100);
  assert.ok(first.usage.completion_tokens >= 1 && first.usage.completion_tokens <= 8);
  const second = await ask("And what is a prefix cache?");
  assert.ok(
    second.usage.prompt_tokens_details.cached_tokens > 0,
    `the shared system prompt is found in the cache: ${JSON.stringify(second.usage)}`,
  );
  assert.ok(second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens);
});

test("streamed completion, then the same prompt again is cached", async () => {
  const model = await modelID();
  const ask = async () => {
    const stream = await client.completions.create({
      model,
      prompt: system + "Once upon a time",
      max_tokens: 6,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) text += c.text;
    }
    return { text, usage };
  };
  const first = await ask();
  const second = await ask();
  assert.equal(second.text, first.text, "greedy decoding repeats itself");
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
});

test("non-streamed completion, any model name, and a refused request", async () => {
  const model = await modelID();
  const r = await client.completions.create({ model, prompt: "Hello", max_tokens: 4, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.equal(r.usage.completion_tokens, r.choices[0].finish_reason === "length" ? 4 : r.usage.completion_tokens);

  // As llama-server: with one model loaded, the name an SDK sends is served.
  const other = await client.completions.create({ model: "gpt-4o-mini", prompt: "Hello", max_tokens: 1 });
  assert.equal(other.object, "text_completion");
  assert.equal(other.usage.completion_tokens, 1);

  await assert.rejects(
    client.completions.create({ model, prompt: "Hello", max_tokens: -1 }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === "max_tokens",
  );
});

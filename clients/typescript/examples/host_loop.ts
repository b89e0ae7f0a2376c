/**
 * One host's turn loop in TypeScript against `fermix serve`: the hooks, the user's message with
 * the prompt a model would get (one request), the reply, a memory tool call, and a recall.
 * Run: `node dist/examples/host_loop.js` with FERMIX_URL and FERMIX_TOKEN set; prints what it
 * saw as one JSON line.
 */
import { FermixClient, FermixError } from "../src/client.js";

const url = process.env.FERMIX_URL ?? "http://127.0.0.1:8765";
const token = process.env.FERMIX_TOKEN ?? "";
const memory = new FermixClient(url, token);
const turn = { agent_id: "ada", owner_id: "alice", conversation: "telegram:42" } as const;

/** Stands in for a chat model: answers from the prompt it is given. */
function model(messages: { role?: unknown; content?: unknown }[]): string {
  const last = messages[messages.length - 1];
  return `You said: ${String(last?.content ?? "")}`;
}

async function main(): Promise<void> {
  await memory.beforeTurn({ ...turn, context_window: 128_000 });
  // The user's message and the prompt composed after it, in one request (ADR-0089).
  const { id, prompt } = await memory.appendMessage({
    ...turn,
    role: "user",
    content: "I live in Paris",
    sender: "alice",
    prompt: { system: "You are Ada." },
  });
  if (prompt === undefined) throw new Error("the server gave no prompt");
  const reply = model(prompt.messages);
  await memory.appendMessage({ ...turn, role: "assistant", content: reply });
  const stored = await memory.dispatchTool({
    ...turn,
    name: "memory_store",
    arguments: { key: "home_city", value: "Lives in Paris" },
  });
  await memory.afterTurn({ ...turn, peak_prompt_tokens: 1200 });
  const found = await memory.recall({ ...turn, query: "Paris", mode: "keyword" });
  let refused = "";
  try {
    await memory.appendMessage({ ...turn, role: "user", content: "x", agent_id: "" });
  } catch (error) {
    if (!(error instanceof FermixError)) throw error;
    refused = error.code;
  }
  const summary = {
    first_id: id,
    system: prompt.messages[0]?.content,
    reply,
    stored: stored.ok,
    recalled: found.memories.map((hit) => hit.memory.value),
    refused,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

await main();

/**
 * A typed client of the fermix memory server's HTTP API (`fermix serve`, ADR-0073).
 *
 * Every type comes from `schema.d.ts`, generated from the server's OpenAPI document
 * (`npm run generate`): a body is the keyword arguments of the Python call of the same name, an
 * answer its result. A failure is thrown as a `FermixError` carrying the server's typed code.
 */
import type { operations } from "./schema.js";

/** The JSON body an operation takes. */
export type Body<O extends keyof operations> = operations[O] extends {
  requestBody: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** The JSON answer of an operation with status `S`. */
export type Answer<O extends keyof operations, S extends number = 200> = operations[O]["responses"] extends Record<
  S,
  { content: { "application/json": infer A } }
>
  ? A
  : never;

type Query = Record<string, string | number | boolean | undefined>;

/** A refusal of the server: its HTTP status and typed code (`invalid_message`, `forbidden`, ...). */
export class FermixError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "FermixError";
  }
}

export class FermixClient {
  /** `baseUrl`: where `fermix serve` listens (`http://127.0.0.1:8765`); `token`: a bearer token. */
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private async call<T>(method: "GET" | "POST", path: string, body?: unknown, query?: Query): Promise<T> {
    const url = new URL(path, this.baseUrl);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const init: RequestInit = {
      method,
      headers: { Authorization: `Bearer ${this.token}`, "Content-Type": "application/json" },
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(url, init);
    const data: unknown = await response.json();
    if (!response.ok) {
      const error = (data as { error?: { code?: string; message?: string } }).error ?? {};
      throw new FermixError(response.status, error.code ?? "http_error", error.message ?? response.statusText);
    }
    return data as T;
  }

  appendMessage(body: Body<"append_message">): Promise<Answer<"append_message", 201>> {
    return this.call("POST", "/v1/messages", body);
  }

  appendMessages(body: Body<"append_messages">): Promise<Answer<"append_messages", 201>> {
    return this.call("POST", "/v1/messages/batch", body);
  }

  composePrompt(body: Body<"compose_prompt">): Promise<Answer<"compose_prompt">> {
    return this.call("POST", "/v1/prompt", body);
  }

  beforeTurn(body: Body<"before_turn">): Promise<Answer<"before_turn">> {
    return this.call("POST", "/v1/turns/before", body);
  }

  afterTurn(body: Body<"after_turn">): Promise<Answer<"after_turn", 202>> {
    return this.call("POST", "/v1/turns/after", body);
  }

  handleCommand(body: Body<"handle_command">): Promise<Answer<"handle_command">> {
    return this.call("POST", "/v1/commands", body);
  }

  recall(body: Body<"recall">): Promise<Answer<"recall">> {
    return this.call("POST", "/v1/recall", body);
  }

  writeMemory(body: Body<"write_memory">): Promise<Answer<"write_memory">> {
    return this.call("POST", "/v1/memories", body);
  }

  toolDefinitions(style: "openai" | "anthropic" = "openai"): Promise<Answer<"tool_definitions">> {
    return this.call("GET", "/v1/tools", undefined, { style });
  }

  dispatchTool(body: Body<"dispatch_tool">): Promise<Answer<"dispatch_tool">> {
    return this.call("POST", "/v1/tools/call", body);
  }

  memories(query: { agent_id?: string; owner_id?: string; include_archived?: boolean; as_of?: string } = {}): Promise<
    Answer<"memories">
  > {
    return this.call("GET", "/v1/memories", undefined, query);
  }

  history(query: { agent_id: string; conversation: string; limit?: number }): Promise<Answer<"history">> {
    return this.call("GET", "/v1/history", undefined, query);
  }

  head(): Promise<Answer<"head">> {
    return this.call("GET", "/v1/events/head");
  }

  verify(body: Body<"verify"> = {}): Promise<Answer<"verify">> {
    return this.call("POST", "/v1/events/verify", body);
  }
}

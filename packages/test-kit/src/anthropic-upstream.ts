/**
 * A small Anthropic Messages API for tests: `POST /v1/messages` (and
 * `/messages`), JSON answers and streams with the event sequence Anthropic
 * documents (`message_start`, then per content block `content_block_start`,
 * its deltas and `content_block_stop`, with a `ping` after the first start,
 * then `message_delta` with the stop reason and usage, and `message_stop`),
 * switches to fail in the ways Anthropic does, and a hold that keeps answers
 * back until the test releases them. It answers deterministically:
 * - "Echo: <last user text, or the last tool result's content>";
 * - given `tools` (and `tool_choice` other than `none`) after a user turn
 *   holding no tool result, it calls them instead (`stop_reason: tool_use`):
 *   the named tool, else every tool (only the first with
 *   `disable_parallel_tool_use`), each with the input `{"text": "<last user
 *   text>"}` and the id `toolu_<request>_<index>`, after a text block
 *   `toolPreamble` when that is set;
 * - with `max_tokens` below the answer's words, the answer is cut there
 *   (`stop_reason: max_tokens`) unless `ignoreMaxTokens`; an answer holding
 *   one of `stop_sequences` ends before it (`stop_reason: stop_sequence`).
 * Usage counts one token a word (`input_tokens`: the system prompt's and
 * every message's words, 3 more a message), and reports `cacheReadTokens`
 * and `cacheWriteTokens` as the cache's.
 * Like the real API it refuses (400 `invalid_request_error`) a request that
 * breaks the rules a mapping can get wrong: no `max_tokens`, a `system` role
 * among the messages, roles that do not alternate, empty text, a tool result
 * that answers no `tool_use` of the turn before it, a `tool_use` input that
 * is not an object, a tool without `input_schema`; and without `x-api-key`
 * or `anthropic-version` it answers 401 or 400. It records every request
 * (path, headers, body) and whether the caller went away before the answer
 * was complete.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { listenTracked, PROVIDER_SECRETS, runFakeByHand } from "./llm-upstream.ts";

export type AnthropicMode =
  /** Answers. */
  | "ok"
  /** `failStatus` with Anthropic's error body (its type by the status), carrying `PROVIDER_SECRETS` and the key it got. */
  | "fail"
  /** 429 `rate_limit_error` with `Retry-After: 7`. */
  | "rate-limit"
  /** 200 with an HTML page (carrying `PROVIDER_SECRETS`) instead of JSON or events. */
  | "not-json"
  /** 200, then `oversizeBytes` of a JSON body that never ends; for streams, one delta and then an event of that size. */
  | "oversized"
  /** Streams: one text delta, then an `error` event (`overloaded_error`, carrying `PROVIDER_SECRETS` and the key it got), then the end. */
  | "error-midstream"
  /** Streams: one text delta, then the connection is cut. */
  | "break-midstream"
  /** Never answers. */
  | "stall"
  /** Streams: one text delta, then silence on an open connection. */
  | "stall-midstream"
  /** Answers once the test calls `release()`. */
  | "hold";

/** The content blocks of a request, as Anthropic takes them (only the kinds this fake checks). */
export type AnthropicBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: "tool_result"; tool_use_id: string; content?: string | { type: "text"; text: string }[] }
  | { type: string; [field: string]: unknown };

export interface AnthropicRequestBody {
  model: string;
  max_tokens?: number;
  system?: string | { type: "text"; text: string }[];
  messages: { role: string; content: string | AnthropicBlock[] }[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  stop_sequences?: string[];
  metadata?: { user_id?: string };
  tools?: { name: string; description?: string; input_schema?: unknown; strict?: boolean }[];
  tool_choice?: {
    type: "auto" | "any" | "none" | "tool";
    name?: string;
    disable_parallel_tool_use?: boolean;
  };
  [field: string]: unknown;
}

export interface RecordedAnthropicRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: AnthropicRequestBody;
  /** The caller closed the connection before the answer was complete. */
  aborted: boolean;
}

export interface FakeAnthropic {
  /** Base URL of the Messages API (ends in /v1: calls go to `${baseUrl}/messages`). */
  baseUrl: string;
  requests: RecordedAnthropicRequest[];
  mode: AnthropicMode;
  /** Status of `fail` answers (500 `api_error`, 529 `overloaded_error`, …). */
  failStatus: number;
  /** Size of the body (or event) that `oversized` sends. */
  oversizeBytes: number;
  /** Words of the streamed answer are sent this many ms apart. */
  chunkDelayMs: number;
  /** Answers whole whatever `max_tokens` says, and reports every token it produced. */
  ignoreMaxTokens: boolean;
  /** Reported as `cache_read_input_tokens` and `cache_creation_input_tokens`. */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** A text block sent before tool calls, as Claude often says what it is about to do. */
  toolPreamble: string | undefined;
  /** Answers the requests that `hold` mode kept waiting, and sets the mode back to `ok`. */
  release(): void;
  close(): Promise<void>;
}

const leakyMessage = `connection to ${PROVIDER_SECRETS.databaseUrl} failed while checking api key ${PROVIDER_SECRETS.apiKey}`;

/** Anthropic's error type for each status it answers with. */
const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

const errorBody = (status: number, message: string) =>
  JSON.stringify({
    type: "error",
    error: { type: ERROR_TYPES[status] ?? "api_error", message },
    request_id: "req_fake",
  });

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

const blocksOf = (content: string | AnthropicBlock[]): AnthropicBlock[] =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : [];

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((b: { text?: unknown }) => (typeof b?.text === "string" ? b.text : "")).join(" ")
      : "";

/** Why the real API would refuse this request (400), if it would; see the module's comment. */
function problemOf(body: AnthropicRequestBody): string | undefined {
  if (!Number.isInteger(body.max_tokens) || body.max_tokens! < 1) return "max_tokens: Field required";
  if (!Array.isArray(body.messages)) return "messages: Field required";
  let previous: { role: string; blocks: AnthropicBlock[] } | undefined;
  for (const [i, message] of body.messages.entries()) {
    if (message.role !== "user" && message.role !== "assistant")
      return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (previous?.role === message.role)
      return `messages.${i}: roles must alternate between user and assistant`;
    const blocks = blocksOf(message.content);
    if (blocks.length === 0) return `messages.${i}: all messages must have non-empty content`;
    for (const block of blocks) {
      if (block.type === "text" && !(block as { text: string }).text)
        return `messages.${i}: text content blocks must be non-empty`;
      if (block.type === "tool_use") {
        const input = (block as { input: unknown }).input;
        if (typeof input !== "object" || input === null || Array.isArray(input))
          return `messages.${i}: tool_use.input: Input should be a valid dictionary`;
      }
      if (block.type === "tool_result") {
        const id = (block as { tool_use_id: string }).tool_use_id;
        const asked = (previous?.blocks ?? []).some(
          (b) => b.type === "tool_use" && (b as { id: string }).id === id,
        );
        if (!asked) return `messages.${i}: unexpected tool_use_id found in tool_result blocks: ${id}`;
      }
    }
    previous = { role: message.role, blocks };
  }
  for (const [i, tool] of (body.tools ?? []).entries())
    if (typeof tool.input_schema !== "object" || tool.input_schema === null)
      return `tools.${i}.input_schema: Field required`;
  return undefined;
}

interface ToolUse {
  id: string;
  name: string;
  input: { text: string };
}

/** The tool calls the fake makes for a request, if any (see the module's comment). */
function toolUsesFor(body: AnthropicRequestBody, requestNumber: number): ToolUse[] {
  const last = body.messages.at(-1);
  const choice = body.tool_choice;
  if (!body.tools?.length || choice?.type === "none" || last?.role !== "user") return [];
  const blocks = blocksOf(last.content);
  if (blocks.some((b) => b.type === "tool_result")) return [];
  const names =
    choice?.type === "tool"
      ? [choice.name ?? ""]
      : body.tools.map((t) => t.name).slice(0, choice?.disable_parallel_tool_use ? 1 : undefined);
  const text = blocks.map((b) => textOf([b])).join(" ");
  return names.map((name, index) => ({ id: `toolu_${requestNumber}_${index}`, name, input: { text } }));
}

/** What the answer echoes: the last tool result's content, else the last user turn's text. */
function lastSaid(body: AnthropicRequestBody): string {
  const last = [...body.messages].reverse().find((m) => m.role === "user");
  if (!last) return "";
  const blocks = blocksOf(last.content);
  const result = blocks.filter((b) => b.type === "tool_result").at(-1) as { content?: unknown } | undefined;
  if (result) return textOf(result.content);
  return blocks.map((b) => textOf([b])).join(" ");
}

/** Starts the fake on 127.0.0.1:`port` (0: a free port; `baseUrl` says which). */
export async function startFakeAnthropic(port = 0): Promise<FakeAnthropic> {
  const sockets = new Set<Socket>();
  let held: (() => void)[] = [];
  const fake: FakeAnthropic = {
    baseUrl: "",
    requests: [],
    mode: "ok",
    failStatus: 500,
    oversizeBytes: 256 * 1024,
    chunkDelayMs: 5,
    ignoreMaxTokens: false,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    toolPreamble: undefined,
    release: () => {
      fake.mode = "ok";
      for (const answer of held) answer();
      held = [];
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const json = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(body);

  const server: Server = createServer(async (req, res) => {
    if (req.method !== "POST" || !/^(\/v1)?\/messages$/.test(req.url ?? "")) {
      json(res, 404, errorBody(404, "Not found"));
      return;
    }
    let raw = "";
    for await (const chunk of req) raw += chunk;
    let body: AnthropicRequestBody;
    try {
      body = JSON.parse(raw);
    } catch {
      json(res, 400, errorBody(400, "request body is not valid JSON"));
      return;
    }
    const record: RecordedAnthropicRequest = { path: req.url!, headers: req.headers, body, aborted: false };
    fake.requests.push(record);
    res.on("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });

    if (!req.headers["x-api-key"]) return json(res, 401, errorBody(401, "x-api-key header is required"));
    if (!req.headers["anthropic-version"])
      return json(res, 400, errorBody(400, "anthropic-version: header is required"));
    const problem = problemOf(body);
    if (problem) return json(res, 400, errorBody(400, problem));
    // As a careless provider does, its error names the key it was given.
    if (fake.mode === "fail")
      return json(
        res,
        fake.failStatus,
        errorBody(fake.failStatus, `${leakyMessage}; x-api-key: ${req.headers["x-api-key"]}`),
      );
    if (fake.mode === "rate-limit")
      return json(res, 429, errorBody(429, "Number of request tokens has exceeded your rate limit"), {
        "retry-after": "7",
      });
    if (fake.mode === "not-json") {
      res
        .writeHead(200, { "content-type": "text/html" })
        .end(`<html><body><pre>${leakyMessage}</pre></body></html>`);
      return;
    }
    if (fake.mode === "stall") return; // never answers
    if (fake.mode === "hold") await new Promise<void>((r) => held.push(r));
    if (fake.mode === "oversized" && !body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`{"id":"msg_big","type":"message","role":"assistant","content":[{"type":"text","text":"`);
      res.write("a".repeat(fake.oversizeBytes)); // and never ends
      return;
    }

    const number = fake.requests.length;
    const toolUses = toolUsesFor(body, number);
    const maxTokens = fake.ignoreMaxTokens ? undefined : body.max_tokens;
    let answer = toolUses.length ? (fake.toolPreamble ?? "") : `Echo: ${lastSaid(body)}`;
    let stopReason = toolUses.length ? "tool_use" : "end_turn";
    let stopSequence: string | null = null;
    for (const sequence of body.stop_sequences ?? []) {
      const at = answer.indexOf(sequence);
      if (sequence && at >= 0) {
        answer = answer.slice(0, at);
        stopReason = "stop_sequence";
        stopSequence = sequence;
        break;
      }
    }
    const cut = maxTokens !== undefined && words(answer) > maxTokens;
    if (cut) {
      answer = answer.split(" ").slice(0, maxTokens).join(" ");
      stopReason = "max_tokens";
      stopSequence = null;
    }
    const inputTokens =
      words(textOf(body.system ?? "")) +
      body.messages.reduce(
        (n, m) =>
          n +
          3 +
          blocksOf(m.content).reduce(
            (k, b) =>
              k +
              (b.type === "tool_use"
                ? words(JSON.stringify((b as { input: unknown }).input).replace(/\W/g, " "))
                : words(textOf(b.type === "tool_result" ? (b as { content?: unknown }).content : [b]))),
            0,
          ),
        0,
      );
    const outputTokens =
      words(answer) + toolUses.reduce((n, t) => n + words(JSON.stringify(t.input).replace(/\W/g, " ")), 0);
    const usage = {
      input_tokens: inputTokens,
      cache_creation_input_tokens: fake.cacheWriteTokens,
      cache_read_input_tokens: fake.cacheReadTokens,
      output_tokens: outputTokens,
    };
    const model = `${body.model}-20260101`;
    const id = `msg_fake_${number}`;
    const content: ({ type: "text"; text: string } | ({ type: "tool_use" } & ToolUse))[] = [
      ...(answer ? [{ type: "text" as const, text: answer }] : []),
      ...toolUses.map((t) => ({ type: "tool_use" as const, ...t })),
    ];

    if (!body.stream) {
      json(
        res,
        200,
        JSON.stringify({
          id,
          type: "message",
          role: "assistant",
          model,
          content,
          stop_reason: stopReason,
          stop_sequence: stopSequence,
          usage,
        }),
      );
      return;
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (event: { type: string; [field: string]: unknown }) =>
      res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    const pause = () => new Promise((r) => setTimeout(r, fake.chunkDelayMs));
    send({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    });
    let first = true;
    for (const [index, block] of content.entries()) {
      if (res.destroyed) return;
      if (block.type === "text") {
        send({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
        if (index === 0) send({ type: "ping" });
        for (const piece of block.text.split(/(?<= )/)) {
          if (res.destroyed) return;
          send({ type: "content_block_delta", index, delta: { type: "text_delta", text: piece } });
          if (first) {
            first = false;
            if (fake.mode === "stall-midstream") return; // stops sending, keeps the connection
            if (fake.mode === "break-midstream") {
              // Once what was written is on its way (a comment line's callback says so), not before.
              await new Promise<void>((flushed) => res.write(":\n\n", () => flushed()));
              res.socket?.destroy();
              return;
            }
            if (fake.mode === "oversized") {
              res.write(
                `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":"${"a".repeat(fake.oversizeBytes)}`,
              );
              return; // and never ends
            }
            if (fake.mode === "error-midstream") {
              const message = `${leakyMessage}; x-api-key: ${req.headers["x-api-key"]}`;
              send({ type: "error", error: { type: "overloaded_error", message } });
              res.end();
              return;
            }
          }
          await pause();
        }
      } else {
        // A tool_use block opens with an empty input; its JSON comes in pieces, the first one empty, as Anthropic streams it.
        const { input, ...opened } = block;
        send({ type: "content_block_start", index, content_block: { ...opened, input: {} } });
        if (index === 0) send({ type: "ping" });
        const args = JSON.stringify(input);
        const half = Math.ceil(args.length / 2);
        for (const part of ["", args.slice(0, half), args.slice(half)]) {
          send({
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: part },
          });
          await pause();
        }
      }
      send({ type: "content_block_stop", index });
    }
    send({
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: stopSequence },
      usage: { output_tokens: outputTokens },
    });
    send({ type: "message_stop" });
    res.end();
  });
  fake.baseUrl = await listenTracked(server, port, sockets);
  return fake;
}

/** `pnpm exec node packages/test-kit/src/anthropic-upstream.ts [port]` (or `PORT`): run it by hand. */
if (import.meta.main) {
  await runFakeByHand(
    "packages/test-kit/src/anthropic-upstream.ts",
    {
      running: "fake Anthropic Messages API",
      stopped: "fake Anthropic",
    },
    startFakeAnthropic,
  );
}

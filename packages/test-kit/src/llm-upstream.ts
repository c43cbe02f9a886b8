/**
 * A small OpenAI-compatible model provider for tests: `POST /v1/chat/completions`
 * (and `/chat/completions`, and Azure OpenAI's
 * `/openai/deployments/{deployment}/chat/completions?api-version=…`), with usage, SSE streaming, tool calls, switches
 * to fail in the ways real providers do, and a hold that keeps answers back
 * until the test releases them. It answers deterministically, so tests can
 * tell what reached it:
 * - "Echo: <last user or tool message>" (or what `answerWith` makes of the request);
 * - given `tools` (and `tool_choice` other than "none") after a user message,
 *   it calls them instead: the chosen function, else every tool (only the
 *   first with `parallel_tool_calls: false`), each with the arguments
 *   `{"text": "<last user message>"}` and the id `call_<request>_<index>`;
 * - with `max_tokens` below the answer's words, the answer is cut there and
 *   its `finish_reason` is `length` (unless `ignoreMaxTokens`: then it
 *   answers whole and reports every token, as a provider that ignores it);
 * - with `logprobs: true`, each word of the answer is a token with logprob
 *   -0.5 (and `top_logprobs` alternatives, `<word>?`, at -2);
 * - with `n` above 1 (JSON answers only), that many choices: the first the
 *   answer above, each next one it with ` #<choice number>` added (or
 *   what `answerWith` makes of the request for that choice), each cut
 *   at `max_tokens` on its own, the usage counting the tokens of them all;
 * - `POST /v1/embeddings` (and Azure's `…/deployments/{deployment}/embeddings`)
 *   answers, for any model, one vector per input of hashed word counts
 *   (`hashedEmbedding` of `@gw/devstack`: texts that share words are near),
 *   `DEFAULT_EMBEDDING_DIMENSIONS` wide unless `dimensions` says otherwise,
 *   as floats or `encoding_format: base64`; its usage counts a word a token
 *   (a token id a token). The failure modes apply to it as to chat.
 * It records every request it got, and whether the caller went away before
 * the answer was complete.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { onShutdown } from "@gw/core/process";
import { base64OfVector, DEFAULT_EMBEDDING_DIMENSIONS, hashedEmbedding, wordsOf } from "@gw/devstack";

export { DEFAULT_EMBEDDING_DIMENSIONS, hashedEmbedding } from "@gw/devstack";

export type UpstreamMode =
  /** Answers. */
  | "ok"
  /** `failStatus` with an error body that carries `PROVIDER_SECRETS`, as a misconfigured provider's does. */
  | "fail"
  /** 429 with `Retry-After: <retryAfter>` (7 unless set). */
  | "rate-limit"
  /** 200 with an HTML page (carrying `PROVIDER_SECRETS`) instead of JSON or events. */
  | "not-json"
  /**
   * 200, then `oversizeBytes` of a JSON body that never ends; for streams, one
   * delta and then an event of that size that never ends. The connection is kept.
   */
  | "oversized"
  /** Streams: one delta, then an OpenAI-style `{"error":…}` chunk carrying `PROVIDER_SECRETS`, then the end. */
  | "error-midstream"
  /** Never answers. */
  | "stall"
  /** Streams: one delta, then silence on an open connection. */
  | "stall-midstream"
  /** Answers once the test calls `release()`. */
  | "hold"
  /** Streams: one delta, then the rest once the test calls `release()`. */
  | "hold-midstream";

/**
 * How streamed events are framed: `lf` (`data: …\n\n`), `crlf` (every line
 * ends in `\r\n`), `multiline` (each JSON chunk spread over several `data:`
 * lines), `unterminated` (no `[DONE]`, and the last event, the usage, is not
 * followed by a blank line).
 */
export type SseFraming = "lf" | "crlf" | "multiline" | "unterminated";

/** What a leaky provider puts in its error bodies; none of it may reach a client. */
export const PROVIDER_SECRETS = {
  databaseUrl: "postgres://llm_app:pg-pass-8c1f2e@db.internal.example:5432/llm",
  password: "pg-pass-8c1f2e",
  apiKey: "sk-proj-LEAKEDd41d8cd98f00b204e980",
};

const leakyMessage = `connection to ${PROVIDER_SECRETS.databaseUrl} failed while checking api key ${PROVIDER_SECRETS.apiKey}`;

export interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface RecordedRequest {
  /** What was asked: a chat completion, or embeddings (whose `body` then has `input`, not `messages`). */
  kind: "chat" | "embeddings";
  /** The path, query included. */
  path: string;
  authorization: string | undefined;
  /** The `api-key` header (Azure OpenAI's credential). */
  apiKey: string | undefined;
  /** The W3C `traceparent` the caller sent, if any. */
  traceparent: string | undefined;
  body: {
    model: string;
    messages: { role: string; content: string | null; tool_calls?: WireToolCall[]; tool_call_id?: string }[];
    stream?: boolean;
    max_tokens?: number;
    stream_options?: { include_usage?: boolean };
    tools?: { type: "function"; function: { name: string; description?: string; parameters?: unknown } }[];
    tool_choice?: string | { type: "function"; function: { name: string } };
    parallel_tool_calls?: boolean;
    [field: string]: unknown;
  };
  /** The caller closed the connection before the answer was complete. */
  aborted: boolean;
}

export interface FakeLLM {
  /** Base URL to use as LLM_BASE_URL (ends in /v1). */
  baseUrl: string;
  requests: RecordedRequest[];
  mode: UpstreamMode;
  /** Status of `fail` answers. */
  failStatus: number;
  /** The body of `fail` answers; unset: an OpenAI-style error whose message carries `PROVIDER_SECRETS`. */
  failBody: string | undefined;
  /** The `Retry-After` of `rate-limit` answers; `undefined`: none. */
  retryAfter: string | undefined;
  /** Size of the body (or event) that `oversized` sends. */
  oversizeBytes: number;
  framing: SseFraming;
  /** Words of the streamed answer are sent this many ms apart. */
  chunkDelayMs: number;
  /**
   * How the usage it reports counts a text's tokens (each message's text, and
   * `tools` and `response_format` as JSON; the answer's, at most `max_tokens`);
   * unset: one per word, as before.
   */
  countTokens: ((text: string) => number) | undefined;
  /** Answers whole whatever `max_tokens` says, and reports every token it produced, as a misbehaving provider does. */
  ignoreMaxTokens: boolean;
  /**
   * The answer's text for a request (e.g. its system message, as a model that leaks it), and for each
   * other choice of a request for several (`choice` from 1); unset: the echo.
   */
  answerWith: ((body: RecordedRequest["body"], choice: number) => string) | undefined;
  /** Answers the requests that `hold` mode kept waiting, and sets the mode back to `ok`. */
  release(): void;
  close(): Promise<void>;
}

const words = (text: string | null) => (text ?? "").split(/\s+/).filter(Boolean).length;

/** A choice's `logprobs` for `text`, one token a word (with the space after it), as the module's comment says. */
function logprobsFor(text: string, top: number) {
  const token = (t: string, logprob: number) => ({ token: t, logprob, bytes: [...Buffer.from(t)] });
  const tokens = text ? text.split(/(?<= )/) : [];
  return {
    content: tokens.map((t) => ({
      ...token(t, -0.5),
      top_logprobs: Array.from({ length: top }, (_, i) => token(`${t.trim()}?${i || ""}`, -2)),
    })),
    refusal: null,
  };
}

/** The tool calls the fake makes for a request, if any (see the module's comment). */
function toolCallsFor(body: RecordedRequest["body"], requestNumber: number): WireToolCall[] {
  const last = body.messages.at(-1);
  const choice = body.tool_choice;
  if (!body.tools?.length || choice === "none" || last?.role !== "user") return [];
  const names =
    typeof choice === "object"
      ? [choice.function.name]
      : body.tools.map((t) => t.function.name).slice(0, body.parallel_tool_calls === false ? 1 : undefined);
  return names.map((name, index) => ({
    id: `call_${requestNumber}_${index}`,
    type: "function",
    function: { name, arguments: JSON.stringify({ text: last.content }) },
  }));
}

/** The inputs of an embeddings request as the fake reads them: each a text or token ids. */
function embeddingInputs(input: unknown): (string | number[])[] {
  if (typeof input === "string") return [input];
  if (!Array.isArray(input)) return [];
  if (input.every((v) => typeof v === "number")) return [input as number[]];
  return input as (string | number[])[];
}

/** The fake's embeddings answer to `body` (see the module's comment). */
function embeddingsAnswer(body: Record<string, unknown>) {
  const inputs = embeddingInputs(body.input);
  const width = typeof body.dimensions === "number" ? body.dimensions : DEFAULT_EMBEDDING_DIMENSIONS;
  const tokens = inputs.reduce((n, i) => n + (typeof i === "string" ? wordsOf(i).length : i.length), 0);
  return {
    object: "list",
    data: inputs.map((input, index) => {
      const vector = hashedEmbedding(input, width);
      return {
        object: "embedding",
        index,
        embedding: body.encoding_format === "base64" ? base64OfVector(vector) : vector,
      };
    }),
    model: `${String(body.model)}-2026-01-01`,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

/** Starts the provider on 127.0.0.1:`port` (0: a free port; `baseUrl` says which). */
export async function startFakeLLM(port = 0): Promise<FakeLLM> {
  const sockets = new Set<import("node:net").Socket>();
  let held: (() => void)[] = [];
  const fake: FakeLLM = {
    baseUrl: "",
    requests: [],
    mode: "ok",
    failStatus: 500,
    failBody: undefined,
    retryAfter: "7",
    oversizeBytes: 256 * 1024,
    framing: "lf",
    chunkDelayMs: 5,
    countTokens: undefined,
    ignoreMaxTokens: false,
    answerWith: undefined,
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

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0]!;
    const operation = /^((\/v1)?|\/openai\/deployments\/[^/]+)\/(chat\/completions|embeddings)$/.exec(
      path,
    )?.[3];
    if (req.method !== "POST" || !operation) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}');
      return;
    }
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const sent = JSON.parse(raw) as RecordedRequest["body"];
    const record: RecordedRequest = {
      kind: operation === "embeddings" ? "embeddings" : "chat",
      path: req.url!,
      authorization: req.headers.authorization,
      apiKey: req.headers["api-key"] as string | undefined,
      traceparent: req.headers.traceparent as string | undefined,
      body: sent,
      aborted: false,
    };
    // What the model reads: a message's text parts run together (the request is recorded as sent).
    const body = sent.messages ? { ...sent, messages: sent.messages.map(readAsText) } : sent;
    fake.requests.push(record);
    res.on("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });

    if (fake.mode === "fail") {
      res
        .writeHead(fake.failStatus, { "content-type": "application/json" })
        .end(
          fake.failBody ??
            JSON.stringify({ error: { message: leakyMessage, type: "server_error", code: null } }),
        );
      return;
    }
    if (fake.mode === "rate-limit") {
      res
        .writeHead(429, {
          "content-type": "application/json",
          ...(fake.retryAfter === undefined ? {} : { "retry-after": fake.retryAfter }),
        })
        .end('{"error":{"message":"slow down","type":"rate_limit_exceeded"}}');
      return;
    }
    if (fake.mode === "not-json") {
      res
        .writeHead(200, { "content-type": "text/html" })
        .end(`<html><body><pre>${leakyMessage}</pre></body></html>`);
      return;
    }
    if (fake.mode === "stall") return; // never answers
    if (fake.mode === "hold") await new Promise<void>((r) => held.push(r));
    if (record.kind === "embeddings" && fake.mode !== "oversized") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(embeddingsAnswer(body)));
      return;
    }
    if (fake.mode === "oversized" && !body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`{"id":"chatcmpl-big","choices":[{"message":{"role":"assistant","content":"`);
      res.write("a".repeat(fake.oversizeBytes)); // and never ends
      return;
    }

    const lastSaid = [...body.messages].reverse().find((m) => m.role === "user" || m.role === "tool");
    const toolCalls = toolCallsFor(body, fake.requests.length);
    const fullAnswer = toolCalls.length
      ? ""
      : fake.answerWith
        ? fake.answerWith(body, 0)
        : `Echo: ${lastSaid?.content ?? ""}`;
    const maxTokens = fake.ignoreMaxTokens ? undefined : body.max_tokens;
    const cutAt = (text: string) =>
      maxTokens !== undefined && words(text) > maxTokens
        ? text.split(" ").slice(0, maxTokens).join(" ")
        : text;
    const cut = cutAt(fullAnswer) !== fullAnswer;
    const answer = cutAt(fullAnswer);
    const finishReason = toolCalls.length ? "tool_calls" : cut ? "length" : "stop";
    const asked = !body.stream && typeof body.n === "number" && body.n > 1 ? body.n : 1;
    const others = Array.from({ length: asked - 1 }, (_, i) => {
      const whole = toolCalls.length
        ? ""
        : fake.answerWith
          ? fake.answerWith(body, i + 1)
          : `${fullAnswer} #${i + 2}`;
      const text = cutAt(whole);
      return { text, finishReason: toolCalls.length ? "tool_calls" : text !== whole ? "length" : "stop" };
    });
    const count = fake.countTokens;
    // A message's tool calls are read by the model too: their arguments count, as a provider counts them.
    const callArguments = (m: RecordedRequest["body"]["messages"][number]) =>
      (m.tool_calls ?? []).map((c) => c.function.arguments).join(" ");
    const promptTokens = count
      ? body.messages.reduce((n, m) => n + count(m.content ?? "") + count(callArguments(m)) + 4, 3) +
        (body.tools ? count(JSON.stringify(body.tools)) : 0) +
        (body.response_format ? count(JSON.stringify(body.response_format)) : 0)
      : body.messages.reduce(
          (n, m) => n + words(m.content) + words(callArguments(m).replace(/\W/g, " ")) + 3,
          0,
        );
    const completionTokens = count
      ? // A provider stops at max_tokens of its own counting.
        Math.min(
          count(answer) + toolCalls.reduce((n, c) => n + count(c.function.arguments), 0),
          maxTokens ?? Number.POSITIVE_INFINITY,
        )
      : [answer, ...others.map((o) => o.text)].reduce(
          (n, text) =>
            n +
            words(text) +
            toolCalls.reduce((m, c) => m + words(c.function.arguments.replace(/\W/g, " ")), 0),
          0,
        );
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const model = `${body.model}-2026-01-01`;
    const logprobs = (text: string) =>
      body.logprobs === true ? { logprobs: logprobsFor(text, Number(body.top_logprobs ?? 0)) } : {};
    const id = `chatcmpl-${fake.requests.length}`;

    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: toolCalls.length ? null : answer,
                ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
              },
              finish_reason: finishReason,
              ...logprobs(answer),
            },
            ...others.map((other, i) => ({
              index: i + 1,
              message: {
                role: "assistant",
                content: toolCalls.length ? null : other.text,
                ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
              },
              finish_reason: other.finishReason,
              ...logprobs(other.text),
            })),
          ],
          usage,
        }),
      );
      return;
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const framing = fake.framing;
    const eol = framing === "crlf" ? "\r\n" : "\n";
    const frame = (payload: unknown) => {
      const data =
        typeof payload === "string"
          ? payload
          : JSON.stringify(payload, null, framing === "multiline" ? 1 : undefined);
      return data
        .split("\n")
        .map((line) => `data: ${line}${eol}`)
        .join("");
    };
    const send = (payload: unknown) => res.write(frame(payload) + eol);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          delta,
          finish_reason: finish,
          ...(typeof delta.content === "string" && delta.content ? logprobs(delta.content) : {}),
        },
      ],
    });
    send(chunk({ role: "assistant", content: toolCalls.length ? null : "" }));
    // A call's id and name come first, its arguments in two pieces after, as OpenAI streams them.
    for (const [index, call] of toolCalls.entries()) {
      const args = call.function.arguments;
      const half = Math.ceil(args.length / 2);
      send(
        chunk({
          tool_calls: [
            { index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } },
          ],
        }),
      );
      for (const part of [args.slice(0, half), args.slice(half)])
        send(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
    }
    const pieces = answer ? answer.split(/(?<= )/) : [];
    for (const [i, piece] of pieces.entries()) {
      if (res.destroyed) return;
      send(chunk({ content: piece }));
      if (i === 0) {
        if (fake.mode === "stall-midstream") return; // stops sending, keeps the connection
        if (fake.mode === "hold-midstream") await new Promise<void>((r) => held.push(r));
        if (fake.mode === "oversized") {
          res.write(`data: {"choices":[{"index":0,"delta":{"content":"${"a".repeat(fake.oversizeBytes)}`);
          return; // and never ends
        }
        if (fake.mode === "error-midstream") {
          send({ error: { message: leakyMessage, type: "server_error", code: null } });
          res.end();
          return;
        }
      }
      await new Promise((r) => setTimeout(r, fake.chunkDelayMs));
    }
    const tail = [
      chunk({}, finishReason),
      ...(body.stream_options?.include_usage ? [{ ...chunk({}), choices: [], usage }] : []),
    ];
    if (framing === "unterminated") {
      for (const payload of tail.slice(0, -1)) send(payload);
      res.end(frame(tail.at(-1)).trimEnd());
      return;
    }
    for (const payload of tail) send(payload);
    res.end(frame("[DONE]") + eol);
  });
  fake.baseUrl = await listenTracked(server, port, sockets);
  return fake;
}

/**
 * Listens on 127.0.0.1:`port` (0: any free port), keeping the open sockets in
 * `sockets` so a fake's `close` can end them; its base URL (`…/v1`).
 */
export async function listenTracked(
  server: Server,
  port: number,
  sockets: Set<import("node:net").Socket>,
): Promise<string> {
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

/**
 * Runs a fake by hand (`pnpm exec node <script> [port]`, or `PORT`): prints
 * its base URL, stops it on a signal, and stops too when `pnpm exec` goes away.
 */
export async function runFakeByHand(
  script: string,
  names: { running: string; stopped: string },
  start: (port: number) => Promise<{ baseUrl: string; close(): Promise<void> }>,
): Promise<void> {
  const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`usage: pnpm exec node ${script} [port]\n`);
    process.exit(2);
  }
  const fake = await start(port);
  process.stdout.write(`${names.running} at ${fake.baseUrl}\n`);
  onShutdown(async (reason) => {
    await fake.close();
    process.stdout.write(`${names.stopped} stopped (${reason})\n`);
  });
  // `pnpm exec` runs us under a shell shim that a SIGTERM to pnpm ends without passing the signal on:
  // we are then handed to another parent, and stop as if the signal had reached us.
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch); // once: a second SIGTERM would end us before the fake has closed
    process.kill(process.pid, "SIGTERM");
  }, 200).unref();
}

/** `pnpm exec node packages/test-kit/src/llm-upstream.ts [port]` (or `PORT`): run it by hand, e.g. as LLM_BASE_URL for `pnpm start`. */
if (import.meta.main) {
  await runFakeByHand(
    "packages/test-kit/src/llm-upstream.ts",
    {
      running: "fake OpenAI-compatible provider",
      stopped: "fake provider",
    },
    startFakeLLM,
  );
}

/** A message with its content as one text: text parts (`[{type:"text",text}]`) run together. */
function readAsText<M extends { content: unknown }>(message: M): M {
  const { content } = message;
  if (!Array.isArray(content)) return message;
  return { ...message, content: content.map((part: { text?: unknown }) => String(part.text ?? "")).join("") };
}

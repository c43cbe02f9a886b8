/**
 * The development model provider: a small OpenAI-compatible server that
 * `pnpm start` runs when no provider is configured, so a fresh machine
 * answers model calls. It is no model; it answers the same way every time:
 * - `POST /v1/chat/completions` answers with the text of the last user (or
 *   tool) message, as JSON or streamed (with a usage chunk when
 *   `stream_options.include_usage` asks for one);
 * - with `n` above 1 (JSON answers), that many choices, each the same
 *   answer, the usage counting the tokens of them all;
 * - given `tools`, it calls one only when asked to after a user message:
 *   `tool_choice: "required"` calls the first tool, a named tool calls that
 *   one, with arguments made from the tool's schema (each required string is
 *   the user's message, numbers 0, booleans false, an enum its first value);
 * - `POST /v1/embeddings` (model `text-embedding-3-small`) answers with
 *   vectors of hashed word counts (`hashed-embeddings.ts`: texts that share
 *   words are near), `DEFAULT_EMBEDDING_DIMENSIONS` wide unless `dimensions`
 *   says otherwise, as floats or `encoding_format: base64`;
 * - `GET /v1/models` lists its models, `owned_by: "development"`.
 * Usage is counted in its own tokens: up to three characters of a word and
 * the space after them, so that the service's own count of an answer (one
 * token for each streamed piece of at most 16 bytes) agrees with it; an
 * answer stops at `max_completion_tokens` (or `max_tokens`), and at
 * `MAX_ANSWER_TOKENS`, with `finish_reason: "length"`. A request body over
 * `maxRequestBytes` is refused (413) without being read further. It listens
 * on 127.0.0.1 only.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import {
  ALL_DEVELOPMENT_MODELS,
  DEVELOPMENT_EMBEDDING_MODELS,
  DEVELOPMENT_MODELS,
} from "@gw/core/development-models";
import { onShutdown, reportListening } from "@gw/core/process";
import { base64OfVector, DEFAULT_EMBEDDING_DIMENSIONS, hashedEmbedding } from "./hashed-embeddings.ts";

export { ALL_DEVELOPMENT_MODELS, DEVELOPMENT_EMBEDDING_MODELS, DEVELOPMENT_MODELS };

/** Widest vector it makes. */
const MAX_DIMENSIONS = 4096;
/** Most inputs in one embeddings request, as OpenAI allows. */
const MAX_INPUTS = 2048;

/** Largest request body it reads: larger than any the service sends (1 MiB bodies, plus a conversation's context). */
export const DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024;

/** Longest answer, in its tokens, whatever the request asks for. */
export const MAX_ANSWER_TOKENS = 4096;

export interface DevelopmentProviderOptions {
  /** 0: a free port (`port` says which). */
  port: number;
  maxRequestBytes?: number;
  /** Epoch milliseconds, for the answers' `created`. */
  now?: () => number;
}

export interface DevelopmentProvider {
  /** What `LLM_BASE_URL` takes: `http://127.0.0.1:<port>/v1`. */
  baseUrl: string;
  port: number;
  close(): Promise<void>;
}

/** Its tokens: up to three characters of a word with the one space after them (at most 15 UTF-8 bytes), or a space. */
const TOKEN = /\S{1,3}\s?|\s/gu;

export function tokensOf(text: string): string[] {
  return text.match(TOKEN) ?? [];
}

function countTokens(text: string): number {
  let count = 0;
  TOKEN.lastIndex = 0;
  while (TOKEN.exec(text)) count++;
  return count;
}

/** A request it refuses, as OpenAI words its errors. */
class RequestError extends Error {
  readonly status: number;
  readonly param: string | null;
  readonly code: string | null;
  constructor(status: number, message: string, param: string | null = null, code: string | null = null) {
    super(message);
    this.status = status;
    this.param = param;
    this.code = code;
  }
}

interface Message {
  role: string;
  text: string;
}

interface Tool {
  name: string;
  parameters: unknown;
}

interface ChatCall {
  model: string;
  messages: Message[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number;
  /** The tool it calls, if it calls one. */
  call: Tool | undefined;
  /** Characters of the tools' definitions, for the prompt's tokens. */
  toolsText: string;
  /** Choices asked for (`n`). */
  choices: number;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A message's text: its string content, or the text of its parts. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => (isObject(part) && typeof part.text === "string" ? part.text : "")).join("");
}

/** The request's body, checked as far as an answer depends on it. */
function chatCallOf(body: unknown): ChatCall {
  if (!isObject(body)) throw new RequestError(400, "The body must be a JSON object.");
  const { model, messages, tools = [], tool_choice: choice } = body;
  if (typeof model !== "string") throw new RequestError(400, "you must provide a model parameter", "model");
  if (!(DEVELOPMENT_MODELS as readonly string[]).includes(model))
    throw new RequestError(
      404,
      `The model \`${model.slice(0, 256)}\` does not exist: this development provider serves ${DEVELOPMENT_MODELS.join(", ")}.`,
      "model",
      "model_not_found",
    );
  if (!Array.isArray(messages) || messages.length === 0 || !messages.every(isObject))
    throw new RequestError(400, "messages must be a non-empty array of messages.", "messages");
  const limit = body.max_completion_tokens ?? body.max_tokens;
  if (limit !== undefined && limit !== null && !(Number.isInteger(limit) && (limit as number) > 0))
    throw new RequestError(400, "max_tokens must be a positive integer.", "max_tokens");
  if (!Array.isArray(tools) || !tools.every((t) => isObject(t) && isObject(t.function)))
    throw new RequestError(400, "tools must be an array of function tools.", "tools");
  const declared: Tool[] = tools.map((t) => {
    const fn = (t as { function: Record<string, unknown> }).function;
    if (typeof fn.name !== "string" || !fn.name)
      throw new RequestError(400, "Each tool needs a function name.", "tools");
    return { name: fn.name, parameters: fn.parameters };
  });
  const parsed = messages.map((m) => ({ role: String(m.role), text: textOf(m.content) }));
  const chosen = toolToCall(declared, choice);
  return {
    model,
    messages: parsed,
    stream: body.stream === true,
    includeUsage: isObject(body.stream_options) && body.stream_options.include_usage === true,
    maxTokens: Math.min((limit as number | null | undefined) ?? MAX_ANSWER_TOKENS, MAX_ANSWER_TOKENS),
    // After the tool's output, it answers: a loop that keeps asking for a call still ends.
    call: parsed.at(-1)?.role === "user" ? chosen : undefined,
    toolsText: declared.length ? JSON.stringify(tools) : "",
    choices: Number.isInteger(body.n) && (body.n as number) > 1 ? Math.min(body.n as number, 128) : 1,
  };
}

/** The tool `tool_choice` asks to be called: "required" the first, a named one that one; otherwise none. */
function toolToCall(tools: Tool[], choice: unknown): Tool | undefined {
  if (choice === "required") {
    if (!tools.length) throw new RequestError(400, "tool_choice 'required' needs tools.", "tool_choice");
    return tools[0];
  }
  if (!isObject(choice)) return undefined;
  const named = isObject(choice.function) ? choice.function.name : choice.name;
  if (typeof named !== "string") return undefined;
  const tool = tools.find((t) => t.name === named);
  if (!tool) throw new RequestError(400, `tool_choice names a tool that is not in tools.`, "tool_choice");
  return tool;
}

/** Arguments that fit a tool's JSON schema well enough: its required properties, from the user's message. */
function argumentsFor(parameters: unknown, said: string): Record<string, unknown> {
  if (!isObject(parameters) || !isObject(parameters.properties)) return {};
  const required = Array.isArray(parameters.required) ? parameters.required : [];
  const args: Record<string, unknown> = {};
  for (const name of required) {
    const property = typeof name === "string" ? parameters.properties[name] : undefined;
    if (!isObject(property)) continue;
    if (Array.isArray(property.enum) && property.enum.length) args[name as string] = property.enum[0];
    else if (property.type === "string") args[name as string] = said;
    else if (property.type === "number" || property.type === "integer") args[name as string] = 0;
    else if (property.type === "boolean") args[name as string] = false;
    else if (property.type === "array") args[name as string] = [];
    else if (property.type === "object") args[name as string] = {};
  }
  return args;
}

/** The answer to a call: its text or its tool call, cut at the call's token limit. */
function answerTo(call: ChatCall, id: number) {
  const said = [...call.messages].reverse().find((m) => m.role === "user" || m.role === "tool")?.text ?? "";
  const lastUser = [...call.messages].reverse().find((m) => m.role === "user")?.text ?? "";
  const promptTokens =
    call.messages.reduce((n, m) => n + countTokens(m.text) + 3, 3) + countTokens(call.toolsText);
  let toolCall: { id: string; type: "function"; function: { name: string; arguments: string } } | undefined;
  let text = "";
  let completionTokens: number;
  let finishReason: "stop" | "length" | "tool_calls";
  if (call.call) {
    const args = JSON.stringify(argumentsFor(call.call.parameters, lastUser));
    completionTokens = countTokens(args);
    // A call cut short is no call: what a provider does at its limit mid-call.
    if (completionTokens > call.maxTokens) {
      completionTokens = call.maxTokens;
      finishReason = "length";
    } else {
      toolCall = {
        id: `call_dev_${id}`,
        type: "function",
        function: { name: call.call.name, arguments: args },
      };
      finishReason = "tool_calls";
    }
  } else {
    const tokens = tokensOf(said);
    const kept = tokens.slice(0, call.maxTokens);
    text = kept.join("");
    completionTokens = kept.length;
    finishReason = kept.length < tokens.length ? "length" : "stop";
  }
  return {
    text,
    tokens: tokensOf(text),
    toolCall,
    finishReason,
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
  };
}

/** The inputs of an embeddings request, checked as OpenAI checks them, each a text or token ids. */
function embeddingInputsOf(input: unknown): (string | number[])[] {
  const invalid = () => new RequestError(400, "'$.input' is invalid.", "input");
  const isTokens = (v: unknown): v is number[] =>
    Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0);
  if (typeof input === "string") {
    if (!input) throw invalid();
    return [input];
  }
  if (isTokens(input)) return [input];
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_INPUTS) throw invalid();
  if (input.every((v) => typeof v === "string" && v !== "") || input.every(isTokens)) return input;
  throw invalid();
}

/** Reads a body of at most `max` bytes; a larger one is refused before more of it is read. */
async function readBody(req: IncomingMessage, max: number): Promise<string> {
  const tooLarge = () => new RequestError(413, `The request body is over ${max} bytes.`);
  if (Number(req.headers["content-length"]) > max) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  // Left unread past the limit, not destroyed: the refusal still reaches the caller.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** An embeddings request's answer: one hashed-word vector per input (see the module's comment). */
function embeddingsAnswer(body: unknown) {
  if (!isObject(body)) throw new RequestError(400, "The body must be a JSON object.");
  const { model, input, dimensions, encoding_format: format = "float" } = body;
  if (typeof model !== "string") throw new RequestError(400, "you must provide a model parameter", "model");
  if (!(DEVELOPMENT_EMBEDDING_MODELS as readonly string[]).includes(model))
    throw new RequestError(
      404,
      `The model \`${model.slice(0, 256)}\` does not exist or cannot make embeddings: this development provider embeds with ${DEVELOPMENT_EMBEDDING_MODELS.join(", ")}.`,
      "model",
      "model_not_found",
    );
  if (
    dimensions !== undefined &&
    dimensions !== null &&
    !(Number.isInteger(dimensions) && (dimensions as number) >= 1 && (dimensions as number) <= MAX_DIMENSIONS)
  )
    throw new RequestError(400, `dimensions must be an integer from 1 to ${MAX_DIMENSIONS}.`, "dimensions");
  if (format !== "float" && format !== "base64")
    throw new RequestError(400, "encoding_format must be float or base64.", "encoding_format");
  const inputs = embeddingInputsOf(input);
  const width = (dimensions as number | null | undefined) ?? DEFAULT_EMBEDDING_DIMENSIONS;
  const tokens = inputs.reduce((n, i) => n + (typeof i === "string" ? countTokens(i) : i.length), 0);
  return {
    object: "list",
    data: inputs.map((i, index) => {
      const vector = hashedEmbedding(i, width);
      return { object: "embedding", index, embedding: format === "base64" ? base64OfVector(vector) : vector };
    }),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

const modelObject = (id: string) => ({ id, object: "model", created: 0, owned_by: "development" });

function sendJson(res: ServerResponse, status: number, body: unknown, close = false): void {
  res
    .writeHead(status, { "content-type": "application/json", ...(close ? { connection: "close" } : {}) })
    .end(JSON.stringify(body));
}

/** Starts the provider on 127.0.0.1:`options.port`. */
export async function startDevelopmentProvider(
  options: DevelopmentProviderOptions,
): Promise<DevelopmentProvider> {
  const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  const now = options.now ?? Date.now;
  const sockets = new Set<Socket>();
  let requests = 0;

  async function chatCompletion(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    const raw = await readBody(req, maxRequestBytes);
    try {
      body = JSON.parse(raw);
    } catch {
      throw new RequestError(400, "We could not parse the JSON body of your request.");
    }
    const call = chatCallOf(body);
    const n = ++requests;
    const answer = answerTo(call, n);
    const head = { id: `chatcmpl-dev-${n}`, created: Math.floor(now() / 1000), model: call.model };
    if (!call.stream) {
      const completion = answer.usage.completion_tokens * call.choices;
      sendJson(res, 200, {
        ...head,
        object: "chat.completion",
        choices: Array.from({ length: call.choices }, (_, index) => ({
          index,
          message: {
            role: "assistant",
            content: answer.toolCall ? null : answer.text,
            ...(answer.toolCall ? { tool_calls: [answer.toolCall] } : {}),
            refusal: null,
          },
          finish_reason: answer.finishReason,
          logprobs: null,
        })),
        usage: {
          ...answer.usage,
          completion_tokens: completion,
          total_tokens: answer.usage.prompt_tokens + completion,
        },
      });
      return;
    }
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      ...head,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    });
    const events: unknown[] = [chunk({ role: "assistant", content: answer.toolCall ? null : "" })];
    if (answer.toolCall) {
      const { id, type, function: fn } = answer.toolCall;
      // Its id and name first, then its arguments, as OpenAI streams a call.
      events.push(
        chunk({ tool_calls: [{ index: 0, id, type, function: { name: fn.name, arguments: "" } }] }),
      );
      events.push(chunk({ tool_calls: [{ index: 0, function: { arguments: fn.arguments } }] }));
    }
    for (const token of answer.tokens) events.push(chunk({ content: token }));
    events.push(chunk({}, answer.finishReason));
    if (call.includeUsage) events.push({ ...chunk({}), choices: [], usage: answer.usage });
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.end(`${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("")}data: [DONE]\n\n`);
  }

  async function embeddings(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req, maxRequestBytes);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      throw new RequestError(400, "We could not parse the JSON body of your request.");
    }
    sendJson(res, 200, embeddingsAnswer(body));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    if (req.method === "POST" && path === "/v1/chat/completions") return chatCompletion(req, res);
    if (req.method === "POST" && path === "/v1/embeddings") return embeddings(req, res);
    if (req.method === "GET" && path === "/v1/models")
      return sendJson(res, 200, { object: "list", data: ALL_DEVELOPMENT_MODELS.map(modelObject) });
    const id = req.method === "GET" && /^\/v1\/models\/([^/]+)$/.exec(path)?.[1];
    if (id && (ALL_DEVELOPMENT_MODELS as readonly string[]).includes(id))
      return sendJson(res, 200, modelObject(id));
    throw new RequestError(
      404,
      `Unknown request URL: ${req.method} ${path.slice(0, 256)}.`,
      null,
      "unknown_url",
    );
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      const known = err instanceof RequestError;
      const status = known ? err.status : 500;
      // A body left unread (too large, or not wanted) is not waited for: the connection closes after the answer.
      sendJson(
        res,
        status,
        {
          error: {
            message: known ? err.message : "The development provider failed.",
            type: status === 500 ? "server_error" : "invalid_request_error",
            param: known ? err.param : null,
            code: known ? err.code : null,
          },
        },
        !req.complete,
      );
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: "127.0.0.1", exclusive: true }, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

/** `pnpm exec node packages/devstack/src/development-provider.ts [port]` (or `PORT`); `pnpm start` runs it so. */
if (import.meta.main) {
  const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write("usage: pnpm exec node packages/devstack/src/development-provider.ts [port]\n");
    process.exit(2);
  }
  const provider = await startDevelopmentProvider({ port });
  reportListening(provider.port);
  // Run by hand, it says where it is; under `pnpm start`, the stack says so.
  if (!process.send) process.stdout.write(`development model provider at ${provider.baseUrl}\n`);
  onShutdown(() => provider.close());
}

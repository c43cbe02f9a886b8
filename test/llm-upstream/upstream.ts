/**
 * A small OpenAI-compatible model provider for tests: `POST /v1/chat/completions`
 * (and `/chat/completions`), with usage, SSE streaming, and switches to fail,
 * rate-limit or stall. It answers deterministically: "Echo: <last user message>",
 * so tests can tell what reached it. It records every request it got, and
 * whether the caller went away before the answer was complete.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type UpstreamMode = "ok" | "fail" | "rate-limit" | "stall" | "stall-midstream";

export interface RecordedRequest {
  path: string;
  authorization: string | undefined;
  body: {
    model: string;
    messages: { role: string; content: string }[];
    stream?: boolean;
    max_tokens?: number;
    stream_options?: { include_usage?: boolean };
  };
  /** The caller closed the connection before the answer was complete. */
  aborted: boolean;
}

export interface FakeLLM {
  /** Base URL to use as LLM_BASE_URL (ends in /v1). */
  baseUrl: string;
  requests: RecordedRequest[];
  mode: UpstreamMode;
  /** Words of the streamed answer are sent this many ms apart. */
  chunkDelayMs: number;
  close(): Promise<void>;
}

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

export async function startFakeLLM(): Promise<FakeLLM> {
  const sockets = new Set<import("node:net").Socket>();
  const fake: FakeLLM = {
    baseUrl: "",
    requests: [],
    mode: "ok",
    chunkDelayMs: 5,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST" || !/^(\/v1)?\/chat\/completions$/.test(req.url ?? "")) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}');
      return;
    }
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as RecordedRequest["body"];
    const record: RecordedRequest = {
      path: req.url!,
      authorization: req.headers.authorization,
      body,
      aborted: false,
    };
    fake.requests.push(record);
    res.on("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });

    if (fake.mode === "fail") {
      res
        .writeHead(500, { "content-type": "application/json" })
        .end('{"error":{"message":"upstream exploded"}}');
      return;
    }
    if (fake.mode === "rate-limit") {
      res
        .writeHead(429, { "content-type": "application/json", "retry-after": "7" })
        .end('{"error":{"message":"slow down","type":"rate_limit_exceeded"}}');
      return;
    }
    if (fake.mode === "stall") return; // never answers

    const lastUser = [...body.messages].reverse().find((m) => m.role === "user");
    const answer = `Echo: ${lastUser?.content ?? ""}`;
    const promptTokens = body.messages.reduce((n, m) => n + words(m.content) + 3, 0);
    const completionTokens = words(answer);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const model = `${body.model}-2026-01-01`;
    const id = `chatcmpl-${fake.requests.length}`;

    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
          usage,
        }),
      );
      return;
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    send(chunk({ role: "assistant", content: "" }));
    const pieces = answer.split(/(?<= )/);
    for (const [i, piece] of pieces.entries()) {
      if (res.destroyed) return;
      send(chunk({ content: piece }));
      if (fake.mode === "stall-midstream" && i === 0) return; // stops sending, keeps the connection
      await new Promise((r) => setTimeout(r, fake.chunkDelayMs));
    }
    send(chunk({}, "stop"));
    if (body.stream_options?.include_usage) send({ ...chunk({}), choices: [], usage });
    res.end("data: [DONE]\n\n");
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

/** `node test/llm-upstream/upstream.ts [port]`: run it by hand, e.g. as LLM_BASE_URL for `pnpm start`. */
if (import.meta.main) {
  const fake = await startFakeLLM();
  process.stdout.write(`fake OpenAI-compatible provider at ${fake.baseUrl}\n`);
}

/**
 * The provider of the victim benchmark (test/bench/victim.ts): an
 * OpenAI-compatible `POST /v1/chat/completions` that reads the request to its
 * end without keeping or parsing it and answers a few words with usage, as a
 * real provider answers a call capped by `max_tokens`. The test kit's fake
 * provider parses, records and echoes every request, so twenty 1 MB calls
 * would measure its own event loop and heap, not the gateway's.
 * `node test/bench/short-provider.ts` listens on `PORT`.
 */
import { createServer } from "node:http";
import { reportListening } from "@gw/core/process";

const ANSWER = JSON.stringify({
  id: "chatcmpl-short",
  object: "chat.completion",
  created: 1_767_225_600,
  model: "gpt-4o-2026-01-01",
  choices: [{ index: 0, message: { role: "assistant", content: "Paris." }, finish_reason: "stop" }],
  usage: { prompt_tokens: 20, completion_tokens: 2, total_tokens: 22 },
});

const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    if (req.method === "GET") return res.writeHead(200).end('{"ok":true}');
    res.writeHead(200, { "content-type": "application/json" }).end(ANSWER);
  });
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () =>
  reportListening((server.address() as { port: number }).port),
);
// Started by the benchmark over IPC: gone with it.
process.once("disconnect", () => process.exit(0));

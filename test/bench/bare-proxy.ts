/**
 * The floor of the proxy benchmarks: the least any Node proxy adds. A bare
 * `node:http` server that sends every request on to `TARGET` (an origin)
 * through a pooled undici client and relays the answer as it comes: no
 * authentication, no check, no log, no Redis. What a proxied call costs
 * beside this is the gateway's own; what this costs beside the direct call
 * is Node's HTTP server and client and one more loopback hop each way.
 * `node test/bench/bare-proxy.ts` listens on `PORT`; `/healthz` is its own.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { Pool } from "undici";

const target = process.env.TARGET;
if (!target) throw new Error("TARGET (the origin to forward to) is required");
const upstream = new Pool(target, { connections: 64 });

/** Hop-by-hop headers (RFC 9110 §7.6.1) and the host, which is the upstream's. */
const HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "host", "te", "trailer"]);

function forwardable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !HOP.has(name)) out[name] = value;
  return out;
}

const server = createServer((req, res) => {
  if (req.url === "/healthz") return void res.end("ok");
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  upstream
    .request({
      method: req.method as "GET",
      path: req.url ?? "/",
      headers: forwardable(req.headers),
      body: hasBody ? req : undefined,
    })
    .then(
      (answer) => {
        res.writeHead(answer.statusCode, forwardable(answer.headers));
        answer.body.pipe(res);
      },
      () => {
        res.writeHead(502).end();
      },
    );
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1");

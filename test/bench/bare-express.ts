/**
 * The baseline of the HTTP benchmarks: a bare Express 5 app answering what
 * the gateway answers (the same JSON bodies), with nothing in front of it.
 * `node test/bench/bare-express.ts` listens on `PORT`.
 */
import express from "express";

const WHOAMI = {
  org: "bench",
  user: "alice",
  keyId: "key_00000000000000000000000000",
  permissions: ["authorization:read", "authorization:write"],
  credential: "api_key",
  onBehalfOf: false,
};
const TOKEN = { token: `eyJhbGciOiJFUzI1NiJ9.${"x".repeat(400)}.${"y".repeat(86)}` };

const app = express();
app.get("/api/v1/authentication/whoami", (_req, res) => {
  res.json(WHOAMI);
});
app.post("/api/v1/authentication/api-keys/exchange-token", express.json(), (_req, res) => {
  res.json(TOKEN);
});
const server = app.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`);
});
app.get("/healthz", (_req, res) => {
  res.json({ ok: true });
});

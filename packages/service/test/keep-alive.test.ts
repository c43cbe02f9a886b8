import { get } from "node:http";
import { describe, expect, it } from "vitest";
import { SERVICE_KEEP_ALIVE_MS } from "../src/server.ts";
import { useStack } from "./stack.ts";

describe("the service's idle connections", () => {
  const stack = useStack();

  it("are kept long past Node's 5 s default, and the service says for how long", async () => {
    const header = await new Promise<string>((resolve, reject) =>
      get(`${stack.serviceUrl}/healthz`, { headers: { connection: "keep-alive" } }, (res) => {
        res.resume();
        resolve(String(res.headers["keep-alive"] ?? ""));
      }).on("error", reject),
    );
    expect(SERVICE_KEEP_ALIVE_MS).toBeGreaterThanOrEqual(60_000);
    expect(header).toBe(`timeout=${SERVICE_KEEP_ALIVE_MS / 1000}`);
  });
});

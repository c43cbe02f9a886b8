import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { freePort } from "../src/free-port.ts";
import { startRedisServer } from "../src/redis-server.ts";

describe("redis-server as the stack runs it", () => {
  it("exits on SIGTERM even when it cannot write its data (its directory removed): a stack's Redis never outlives the stack", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-redis-sigterm-"));
    const redis = await startRedisServer({
      port: await freePort(),
      dir: join(dir, "redis"),
      appendOnly: true,
    });
    await rm(dir, { recursive: true, force: true });
    const exited = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10_000);
      redis.process.once("exit", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    // What a stack's Redis gets when the process that started it dies (its parent-death signal).
    redis.process.kill("SIGTERM");
    const gone = await exited;
    if (!gone) redis.process.kill("SIGKILL");
    expect(gone, "redis-server exited on SIGTERM").toBe(true);
  });
});

import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { ephemeralRangeStart, freePort } from "../src/free-port.ts";

describe("freePort", () => {
  it("hands out ports below the kernel's ephemeral range, free to listen on", async () => {
    const start = ephemeralRangeStart();
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(start);
    }
    // Each can be listened on by whoever was given it.
    for (const port of ports.slice(0, 5)) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("never a port the kernel gives to listen(0) or an outgoing connection", async () => {
    const kernel = createServer();
    await new Promise<void>((resolve) => kernel.listen(0, "127.0.0.1", resolve));
    const picked = (kernel.address() as { port: number }).port;
    kernel.close();
    expect(picked).toBeGreaterThanOrEqual(ephemeralRangeStart());
    expect(await freePort()).toBeLessThan(ephemeralRangeStart());
  });

  it("never hands out a port twice in a process, and in a vitest worker only ports of its own slice", async () => {
    const given = process.env.VITEST_POOL_ID;
    process.env.VITEST_POOL_ID = "3";
    try {
      const ports: number[] = [];
      for (let i = 0; i < 300; i++) ports.push(await freePort());
      expect(new Set(ports).size).toBe(ports.length);
      const size = Math.floor((ephemeralRangeStart() - 10_000) / 8);
      for (const port of ports) {
        expect(port).toBeGreaterThanOrEqual(10_000 + 2 * size);
        expect(port).toBeLessThan(10_000 + 3 * size);
      }
    } finally {
      if (given === undefined) delete process.env.VITEST_POOL_ID;
      else process.env.VITEST_POOL_ID = given;
    }
  });

  it("never hands out a port that another process drawing from the same slice has just handed out", async () => {
    // Another suite's worker 3 on the same machine: it draws 300 ports, says them, and holds on.
    const other = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const { freePort } = await import(${JSON.stringify(new URL("../src/free-port.ts", import.meta.url).href)});
         const ports = [];
         for (let i = 0; i < 300; i++) ports.push(await freePort());
         process.stdout.write(JSON.stringify(ports) + "\\n");
         process.stdin.on("end", () => process.exit(0)).resume();`,
      ],
      { env: { ...process.env, VITEST_POOL_ID: "3" }, stdio: ["pipe", "pipe", "inherit"] },
    );
    const given = process.env.VITEST_POOL_ID;
    try {
      const [line] = (await once(createInterface({ input: other.stdout! }), "line")) as [string];
      const theirs = new Set(JSON.parse(line) as number[]);
      expect(theirs.size).toBe(300);
      process.env.VITEST_POOL_ID = "3";
      const ours: number[] = [];
      for (let i = 0; i < 300; i++) ours.push(await freePort());
      // A slice holds about 2,800 ports: drawn at random, 300 and 300 would share about 30.
      expect(ours.filter((port) => theirs.has(port))).toEqual([]);
    } finally {
      if (given === undefined) delete process.env.VITEST_POOL_ID;
      else process.env.VITEST_POOL_ID = given;
      other.stdin!.end();
      await once(other, "exit");
    }
  });
});

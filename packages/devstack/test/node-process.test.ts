import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMPILE_CACHE_DIR, OUTPUT_TAIL_CHARS, startNodeProcess } from "../src/node-process.ts";

const entry = "packages/devstack/test/fixtures/chatty-process.ts";

describe("startNodeProcess", () => {
  it("keeps only a bounded tail of what a child prints, however much it prints", async () => {
    const child = await startNodeProcess({
      name: "chatty",
      entry,
      port: 0,
      env: { PATH: process.env.PATH, LINES: "20000" }, // about 2 MB
    });
    await waitFor(() => child.outputTail().includes("start line 19999 "));
    expect(child.outputTail().length).toBeLessThanOrEqual(OUTPUT_TAIL_CHARS);

    await fetch(`${child.url}/talk`);
    await waitFor(() => child.outputTail().includes("talk line 19999 "));
    expect(child.outputTail().length).toBeLessThanOrEqual(OUTPUT_TAIL_CHARS);
    expect(child.outputTail()).not.toContain("start line");
    await child.stop();
  });

  it("reports a child that exits before it is ready with the end of its output", async () => {
    const failing = startNodeProcess({
      name: "chatty",
      entry,
      port: 0,
      env: { PATH: process.env.PATH, LINES: "20000", EXIT_CODE: "3" },
    });
    const error: Error = await failing.then(
      () => {
        throw new Error("expected the start to fail");
      },
      (err: Error) => err,
    );
    expect(error.message).toMatch(/^chatty exited with code 3 before it was ready; its last output:\n/);
    expect(error.message).toContain("start line 19999 ");
    expect(error.message).toMatch(/giving up\n$/);
    expect(error.message.length).toBeLessThanOrEqual(OUTPUT_TAIL_CHARS + 100);
  });

  it("waits on the readiness check it is given", async () => {
    let asked = 0;
    const child = await startNodeProcess({
      name: "chatty",
      entry,
      port: 0,
      env: { PATH: process.env.PATH, LINES: "1" },
      isReady: async (port) => {
        expect(port).toBeGreaterThan(0); // the port the child reported, never 0
        return ++asked >= 3;
      },
    });
    expect(asked).toBe(3);
    await child.stop();
  });

  it("given port 0, learns the port the child bound from the child itself", async () => {
    const child = await startNodeProcess({
      name: "chatty",
      entry,
      port: 0,
      env: { PATH: process.env.PATH, LINES: "1" },
    });
    expect(child.port).toBeGreaterThan(0);
    expect(child.url).toBe(`http://127.0.0.1:${child.port}`);
    expect(await (await fetch(`${child.url}/healthz`)).text()).toBe("ok");
    await child.stop();
  });

  it("runs its child with Node's compile cache: the project's, unless the environment names another or turns it off", async () => {
    const cacheDir = async (env: NodeJS.ProcessEnv) => {
      const child = await startNodeProcess({
        name: "chatty",
        entry,
        port: 0,
        env: { PATH: process.env.PATH, LINES: "1", ...env },
      });
      try {
        // Node keeps its entries in a folder per Node version inside the directory it was given.
        const dir = await (await fetch(`${child.url}/compile-cache`)).text();
        return dir && dirname(dir);
      } finally {
        await child.stop();
      }
    };
    expect(await cacheDir({})).toBe(process.env.NODE_COMPILE_CACHE ?? COMPILE_CACHE_DIR);
    const elsewhere = await mkdtemp(join(tmpdir(), "gw-compile-cache-"));
    try {
      expect(await cacheDir({ NODE_COMPILE_CACHE: elsewhere })).toBe(elsewhere);
      expect(await cacheDir({ NODE_DISABLE_COMPILE_CACHE: "1" })).toBe("");
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

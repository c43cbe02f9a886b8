/**
 * Memory while a large file is uploaded and downloaded: one file of
 * `BENCH_FILE_MIB` MiB (default 512, `FILE_MAX_BYTES`'s default) sent to
 * `POST /api/v1/llm/files` through the gateway as a multipart form streamed
 * from a generator (no length declared, as a client streaming from disk
 * would), then read back from `/content`. The resident memory (`VmRSS`) of the
 * gateway and service processes is sampled every `SAMPLE_MS` while each
 * transfer runs: the table gives each process's memory just before it, the
 * highest sample during it, and the difference. An upload the service held
 * in memory would show the file's size there; one streamed shows a few
 * pieces of `PIECE_BYTES` at most. Each process has first taken a small file
 * (its code loaded, its pools open).
 *
 * Alone: `pnpm exec node test/bench/file-upload.ts` (prints; `BENCH_OUTPUT` writes a report).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { freePort, startSpiceDBLocalProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startTestPostgres, startTestRedis } from "@gw/test-kit";
import { startFakeLLM } from "@gw/test-kit/llm-upstream";
import { benchStackEnv, rssMiB, startServiceAndGateway } from "./http.ts";
import { Report } from "./report.ts";

const FILE_MIB = Number(process.env.BENCH_FILE_MIB ?? 512);
const SAMPLE_MS = 50;
const MiB = 1024 * 1024;
const BOUNDARY = "bench-file-upload";

/** Samples the processes' resident memory until stopped: the first sample and the highest, per process. */
function sampleMemory(pids: Record<string, number>) {
  const start: Record<string, number> = {};
  const peak: Record<string, number> = {};
  const sample = async () => {
    for (const [name, pid] of Object.entries(pids)) {
      const rss = await rssMiB(pid);
      start[name] ??= rss;
      peak[name] = Math.max(peak[name] ?? 0, rss);
    }
  };
  const first = sample();
  const timer = setInterval(() => void sample(), SAMPLE_MS);
  return {
    ready: first,
    async stop() {
      clearInterval(timer);
      await sample();
      return { start, peak };
    },
  };
}

/** A multipart form of `purpose` and a file of `mib` MiB, made a MiB at a time as the body is read. */
function streamedForm(mib: number): ReadableStream<Uint8Array> {
  const block = randomBytes(MiB);
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="large.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  let sent = -1;
  return new ReadableStream({
    pull(controller) {
      if (sent === -1) controller.enqueue(head);
      else if (sent < mib) {
        // A fresh copy each time: the body may hold on to what it was given until it is written.
        const piece = Buffer.from(block);
        piece.writeUInt32BE(sent, 0);
        controller.enqueue(piece);
      } else if (sent === mib) controller.enqueue(Buffer.from(`\r\n--${BOUNDARY}--\r\n`));
      else controller.close();
      sent++;
    },
  });
}

export async function benchFileUpload(report: Report): Promise<void> {
  const [redis, postgres, llm] = await Promise.all([startTestRedis(), startTestPostgres(), startFakeLLM()]);
  const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-files-"));
  const spicedbPort = await freePort();
  const spicedb = await startSpiceDBLocalProcess({
    port: spicedbPort,
    env: { PATH: process.env.PATH, LOG_LEVEL: "warn", DATA_DIR: dataDir },
  });
  const common = {
    ...benchStackEnv({ redis: redis.url, postgres: postgres.url, spicedbPort, dataDir, logLevel: "warn" }),
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
    FILE_MAX_BYTES: String(Math.max(FILE_MIB, 1) * MiB),
  };
  const { service, gateway } = await startServiceAndGateway(common, dataDir);
  const client = createRedis(redis.url, { connectionName: "bench-files" });
  try {
    const { secret } = await new ApiKeyStore(client).create({
      org: "bench",
      owner: "backend",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    const headers = { authorization: `Bearer ${secret}`, "x-on-behalf-of": "alice" };
    const upload = async (mib: number) => {
      const res = await fetch(`${gateway.url}/api/v1/llm/files`, {
        method: "POST",
        headers: { ...headers, "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
        body: streamedForm(mib),
        duplex: "half",
      } as RequestInit);
      if (res.status !== 200) throw new Error(`upload: HTTP ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string; bytes: number };
    };
    const download = async (id: string) => {
      const res = await fetch(`${gateway.url}/api/v1/llm/files/${id}/content`, { headers });
      if (res.status !== 200 || !res.body) throw new Error(`content: HTTP ${res.status}`);
      let bytes = 0;
      for await (const chunk of res.body) bytes += chunk.length;
      return bytes;
    };
    // Warm-up: code loaded, pools open, on both sides.
    await download((await upload(1)).id);

    const pids = { gateway: gateway.process.pid!, service: service.process.pid! };
    const timed = async <T>(run: () => Promise<T>) => {
      const memory = sampleMemory(pids);
      await memory.ready;
      const started = performance.now();
      const result = await run();
      const seconds = (performance.now() - started) / 1000;
      return { result, seconds, ...(await memory.stop()) };
    };
    const up = await timed(() => upload(FILE_MIB));
    if (up.result.bytes !== FILE_MIB * MiB) throw new Error(`stored ${up.result.bytes} bytes`);
    const down = await timed(() => download(up.result.id));
    if (down.result !== FILE_MIB * MiB) throw new Error(`read back ${down.result} bytes`);

    report.section(
      `Files: memory while a ${FILE_MIB} MiB file is uploaded and read back`,
      `One file of ${FILE_MIB} MiB through the gateway to \`POST /api/v1/llm/files\` as a multipart form streamed without a declared length, stored in PostgreSQL a 1 MiB piece at a time, then read back from \`/content\`. Resident memory (\`VmRSS\`) of each process sampled every ${SAMPLE_MS} ms during each transfer, after a 1 MiB warm-up: a process that held the file would grow by its size.`,
    );
    const mib = (n: number) => n.toFixed(0);
    const rows: (string | number)[][] = [];
    for (const [what, run] of [
      ["upload", up],
      ["download", down],
    ] as const) {
      for (const name of Object.keys(pids)) {
        rows.push([
          what,
          name,
          mib(run.start[name]!),
          mib(run.peak[name]!),
          `+${mib(run.peak[name]! - run.start[name]!)}`,
          (FILE_MIB / run.seconds).toFixed(0),
        ]);
      }
    }
    report.table(
      ["transfer", "process", "RSS before, MiB", "peak, MiB", "peak − before, MiB", "MiB/s"],
      rows,
    );
  } finally {
    client.disconnect();
    await Promise.all([gateway.stop(), service.stop()]);
    await spicedb.stop();
    await Promise.all([redis.stop(), postgres.stop(), llm.close()]);
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load = loadavg() as [number, number, number];
  await benchFileUpload(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load);
  process.exit(0);
}

import { vi } from "vitest";
import type { Stack } from "./stack.ts";

export const SCHEDULES = "/api/v1/llm/evals/schedules";

export interface RunJson {
  id: string;
  status: "queued" | "running" | "completed" | "failed";
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  error: string | null;
  results: {
    input: string;
    expected: string | null;
    output: string;
    passed: boolean | null;
    usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  }[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
}

/** The eval schedule endpoints through the gateway, as one key and end user. */
export function evalClient(stack: Stack, secret: string, user = "alice") {
  const call = (path: string, init: { method?: string; json?: unknown } = {}) =>
    stack.call(secret, path, { ...init, user });
  const client = {
    create: (body: Record<string, unknown>) => call(SCHEDULES, { json: body }),
    get: (id: string) => call(`${SCHEDULES}/${id}`),
    list: (query = "") => call(`${SCHEDULES}${query}`),
    runs: (id: string, query = "") => call(`${SCHEDULES}/${id}/runs${query}`),
    delete: (id: string) => call(`${SCHEDULES}/${id}`, { method: "DELETE" }),
    /** Creates a schedule, failing the test unless that answers 200. */
    async created(body: Record<string, unknown>): Promise<{ id: string } & Record<string, unknown>> {
      const res = await client.create(body);
      if (res.status !== 200) throw new Error(`create answered ${res.status}: ${await res.text()}`);
      return res.json();
    },
    /** Every run of the schedule, newest first. */
    async allRuns(id: string): Promise<RunJson[]> {
      const res = await client.runs(id, "?limit=100");
      if (res.status !== 200) throw new Error(`runs answered ${res.status}: ${await res.text()}`);
      return (await res.json()).data;
    },
    /** Waits (bounded) until the schedule's runs satisfy `check`, which throws until they do. */
    async untilRuns(id: string, check: (runs: RunJson[]) => void, timeout = 20_000): Promise<RunJson[]> {
      return vi.waitFor(
        async () => {
          const runs = await client.allRuns(id);
          check(runs);
          return runs;
        },
        { timeout, interval: 100 },
      );
    },
  };
  return client;
}

export const finished = (runs: RunJson[]) =>
  runs.filter((r) => r.status === "completed" || r.status === "failed");

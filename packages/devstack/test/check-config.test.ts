import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkRepository,
  exportedMetrics,
  knownVariables,
  undocumented,
  unknownIn,
  unknownMetrics,
} from "../src/check-config.ts";

const fixture = (name: string) =>
  readFileSync(resolve(import.meta.dirname, "fixtures/config-check", name), "utf8");
const known = knownVariables();

describe("config check", () => {
  it("passes on the repository as it is", async () => {
    expect(await checkRepository()).toEqual([]);
  });

  it("knows the variables of both processes and of the dev stack", () => {
    for (const name of [
      "PORT",
      "REDIS_URL",
      "GATEWAY_BOOTSTRAP_ADMIN_KEY",
      "API_KEY_CACHE_TTL_MS",
      "LOCAL_REDIS_PORT",
    ]) {
      expect(known.has(name), name).toBe(true);
    }
  });

  it.each([
    ["compose-typo.yml", ["compose-typo.yml: sets REDIS_ULR, which no process reads"]],
    ["k8s-unknown.yaml", ["k8s-unknown.yaml: sets API_KEY_CACHE_TTL, which no process reads"]],
    ["Dockerfile", ["Dockerfile: sets LOGLEVEL, which no process reads"]],
  ])("flags an unknown variable in %s", (name, problems) => {
    expect(unknownIn(name, fixture(name), known)).toEqual(problems);
  });

  it("refuses a deployment file that is not valid YAML", () => {
    expect(() => unknownIn("broken.yaml", fixture("broken.yaml"), known)).toThrow(/broken\.yaml/);
  });

  it("flags every variable the README does not document", () => {
    const problems = undocumented(fixture("readme-missing.md"), known);
    expect(problems).toContain("README.md: REDIS_URL is not documented");
    expect(problems.some((p) => p.includes(" PORT "))).toBe(false);
    expect(problems).toHaveLength(known.size - 1);
  });

  it("flags a dashboard panel that queries a metric nothing exports", async () => {
    const exported = await exportedMetrics();
    expect(exported.has("gateway_rate_limit_decisions_total")).toBe(true);
    expect(unknownMetrics("dash.json", fixture("dashboard-stale.json"), exported)).toEqual([
      'dash.json: panel "Old name" queries gateway_ratelimit_rejections_total, which nothing exports',
    ]);
  });
});

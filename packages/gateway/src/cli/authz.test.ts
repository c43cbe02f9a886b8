import { RUN_TO_EXIT_TEST_TIMEOUT_MS, spicedbEnv } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../test/authorization-helpers.ts";
import { useGateway } from "../../test/harness.ts";
import { type CliVia, runCli } from "../../test/run-cli.ts";

const gw = useGateway();

const authz = (args: string[], via?: CliVia) =>
  runCli(
    "authz",
    args,
    { REDIS_URL: gw.redisUrl, DATABASE_URL: gw.database.url, ...spicedbEnv(gw.spicedb) },
    via,
  );

// One test runs the CLI through pnpm, as a process of its own: seconds of a start on a loaded machine.
describe("pnpm authz (read-only)", { timeout: RUN_TO_EXIT_TEST_TIMEOUT_MS }, () => {
  it("grants shows who holds which role, and audit the organization's or one resource's trail", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f1");
    await o.grant("alice", { resourceType: "file", resourceId: "f1", userId: "bob", role: "reader" });
    await o.grant("bob", { resourceType: "file", resourceId: "f1", userId: "bob", role: "owner" });

    const grants = await authz(["grants", "file", `${o.org}/f1`], "pnpm");
    expect(grants.code, grants.stderr).toBe(0);
    expect(JSON.parse(grants.stdout)).toEqual({
      resourceType: "file",
      resourceId: "f1",
      organization: o.org,
      data: [
        { userId: "alice", role: "owner" },
        { userId: "bob", role: "reader" },
      ],
    });

    const audit = await authz(["audit", "--org", o.org]);
    expect(audit.code, audit.stderr).toBe(0);
    const page = JSON.parse(audit.stdout);
    expect(page.data.map((r: { action: string; outcome: string }) => [r.action, r.outcome])).toEqual([
      ["grant", "denied"],
      ["grant", "allowed"],
      ["register", "allowed"],
    ]);
    const one = await authz(["audit", "--org", o.org, "--resource", "file/f1", "--limit", "1"]);
    expect(JSON.parse(one.stdout)).toMatchObject({ data: [{ action: "grant", outcome: "denied" }] });
    expect(JSON.parse(one.stdout).next_cursor).toEqual(page.data[0].id);
  });

  it("refuses bad usage with exit code 2 and says how to use it", async () => {
    const cases = [
      [],
      ["grants", "file"],
      ["grants", "spreadsheet", "o/x"],
      ["grants", "file", "nopath"],
      ["audit"],
    ];
    // Runs that share nothing: at once.
    const outs = await Promise.all(cases.map((args) => authz(args)));
    for (const [i, out] of outs.entries()) {
      expect(out.code, cases[i]!.join(" ")).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(/usage:/);
    }
  });

  it("--help prints the usage on stdout and exits 0, as pnpm keys --help does", async () => {
    for (const args of [["--help"], ["grants", "-h"]]) {
      const out = await authz(args);
      expect(out.code, args.join(" ")).toBe(0);
      expect(out.stdout).toMatch(/^usage:\n {2}pnpm authz grants/);
      expect(out.stderr).toBe("");
    }
  });
});

import { resolve } from "node:path";
import { describeEachTopology, REPO_ROOT, RUN_TO_EXIT_TEST_TIMEOUT_MS, runToExit } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import { freshOrg, useGateway } from "../../test/harness.ts";
import { type CliVia, runCli } from "../../test/run-cli.ts";

describeEachTopology("on %s Redis", (topology) => {
  const gw = useGateway({}, undefined, topology);

  // In this process (`main` of the CLI), but where the process itself is what is tested: `pnpm keys create`
  // below, `--help`, and a Redis that cannot be reached.
  const keys = (args: string[], via?: CliVia) => runCli("keys", args, { REDIS_URL: gw.redisUrl }, via);

  // Some run the CLI as a process of its own, through pnpm: seconds of a start on a loaded machine.
  describe("pnpm keys", { timeout: RUN_TO_EXIT_TEST_TIMEOUT_MS }, () => {
    it("create prints exactly one JSON object whose secret authenticates", async () => {
      const org = freshOrg();
      const out = await keys(
        [
          "create",
          "--org",
          org,
          "--owner",
          "alice",
          "--limit",
          "second=5",
          "--limit",
          "day=1000",
          "--name",
          "web",
        ],
        "pnpm",
      );
      expect(out.code).toBe(0);
      const created = JSON.parse(out.stdout); // throws unless stdout is exactly one JSON document
      expect(created).toMatchObject({
        id: expect.stringMatching(/^key_/),
        key: expect.stringMatching(/^gwsk_/),
        org,
        owner: "alice",
        name: "web",
        limits: { second: 5, day: 1000 },
        permissions: expect.not.arrayContaining(["admin:api-keys"]),
      });
      const whoami = await gw.call("/api/v1/authentication/whoami", { bearer: created.key });
      expect(await whoami.json()).toMatchObject({ org, user: "alice", keyId: created.id });
    });

    // On a Redis Cluster, that the CLI connects and writes is the thing tested (above); what follows is the
    // same store code, which api-key-store.test.ts runs on a cluster.
    if (topology === "cluster") return;

    it("list shows the org's keys without secrets; update and revoke change them", async ({ expect }) => {
      const org = freshOrg();
      const created = JSON.parse(
        (await keys(["create", "--org", org, "--owner", "bob", "--permissions", "usage:read,admin:api-keys"]))
          .stdout,
      );
      expect(created.permissions).toEqual(["usage:read", "admin:api-keys"]);
      const listed = JSON.parse((await keys(["list", "--org", org])).stdout);
      expect(listed).toHaveLength(1);
      expect(listed[0].id).toBe(created.id);
      expect(JSON.stringify(listed)).not.toContain(created.key);
      // When it last authenticated a request, as the admin API lists it: not yet.
      expect(listed[0].lastUsedAt).toBeNull();
      const used = await gw.call("/api/v1/authentication/whoami", { bearer: created.key });
      expect(used.status).toBe(200);
      // The test's own `expect` (its parameter): `expect.poll` needs the test it runs in, and the global one
      // loses it once a test of the other topology's block, running beside this one, has ended.
      await expect
        .poll(async () => JSON.parse((await keys(["get", created.id])).stdout).lastUsedAt)
        .toMatch(/^\d{4}-\d\d-\d\dT/);

      const updated = JSON.parse(
        (await keys(["update", created.id, "--limit", "minute=30", "--permissions", "responses:read"]))
          .stdout,
      );
      expect(updated).toMatchObject({ limits: { minute: 30 }, permissions: ["responses:read"] });
      const cleared = JSON.parse((await keys(["update", created.id, "--limit", "minute=off"])).stdout);
      expect(cleared.limits).toEqual({});
      const allowlisted = JSON.parse(
        (await keys(["update", created.id, "--models", "m-small, m-large"])).stdout,
      );
      expect(allowlisted.models).toEqual(["m-small", "m-large"]);
      const anyModel = JSON.parse((await keys(["update", created.id, "--models", "any"])).stdout);
      expect(anyModel.models).toBeNull();
      const withModels = JSON.parse(
        (await keys(["create", "--org", org, "--owner", "carol", "--models", "m-small"])).stdout,
      );
      expect(withModels.models).toEqual(["m-small"]);

      const revoked = JSON.parse((await keys(["revoke", created.id])).stdout);
      expect(revoked.status).toBe("revoked");
      await vi.waitFor(
        async () =>
          expect((await gw.call("/api/v1/authentication/whoami", { bearer: created.key })).status).toBe(401),
        { timeout: 1_000, interval: 20 },
      );
    });

    it("list and get show a key past its expiry as expired, as the admin API does; usage --user is an end-user id", async () => {
      const org = freshOrg();
      const { record } = await gw.createKey({ org, owner: "bob", expiresAt: "2020-01-01T00:00:00Z" });
      const listed = JSON.parse((await keys(["list", "--org", org])).stdout);
      expect(listed).toEqual([expect.objectContaining({ id: record.id, status: "expired" })]);
      expect(JSON.parse((await keys(["get", record.id])).stdout).status).toBe("expired");
      const refused = await keys(["usage", record.id, "--user", "caf\u00e9"]);
      expect(refused).toMatchObject({ code: 2, stdout: "" });
      expect(refused.stderr).toMatch(/user/);
    });

    it("takes --limit of every unit and window, for the key and its end users, and shows their usage", async () => {
      const org = freshOrg();
      const created = JSON.parse(
        (
          await keys([
            "create",
            "--org",
            org,
            "--owner",
            "bob",
            "--limit",
            "minute=30",
            "--limit",
            "tokens:minute=100000",
            "--limit",
            "spend:month=50.5",
            "--limit",
            "end-user:tokens:day=50000",
            "--limit",
            "end-user:requests:hour=7",
          ])
        ).stdout,
      );
      expect(created.limits).toEqual({
        minute: 30,
        tokens: { minute: 100_000 },
        spend: { month: 50.5 },
        endUser: { hour: 7, tokens: { day: 50_000 } },
      });
      const updated = JSON.parse(
        (await keys(["update", created.id, "--limit", "spend:month=off", "--limit", "end-user:spend:day=2"]))
          .stdout,
      );
      expect(updated.limits).toEqual({
        minute: 30,
        tokens: { minute: 100_000 },
        endUser: { hour: 7, tokens: { day: 50_000 }, spend: { day: 2 } },
      });
      const usage = JSON.parse((await keys(["usage", created.id, "--user", "alice"])).stdout);
      expect(
        usage.windows.map(
          (w: { scope: string; unit: string; window: string }) => `${w.scope}:${w.unit}:${w.window}`,
        ),
      ).toEqual([
        "key:requests:minute",
        "key:tokens:minute",
        "endUser:requests:hour",
        "endUser:tokens:day",
        "endUser:spend:day",
      ]);
      expect(usage.windows[1]).toMatchObject({ limit: 100_000, used: 0, remaining: 100_000 });
      // A key without request windows of its own: DEFAULT_LIMITS' from the environment, as the gateway counts them.
      const plain = JSON.parse((await keys(["create", "--org", org, "--owner", "carol"])).stdout);
      const withDefaults = (args: string[], value: string) =>
        runCli("keys", args, { REDIS_URL: gw.redisUrl, DEFAULT_LIMITS: value });
      const plainUsage = JSON.parse((await withDefaults(["usage", plain.id], "minute=3,day=50")).stdout);
      expect(plainUsage.windows.map((w: { window: string; limit: number }) => [w.window, w.limit])).toEqual([
        ["minute", 3],
        ["day", 50],
      ]);
      const ownUsage = JSON.parse((await withDefaults(["usage", created.id], "minute=3,day=50")).stdout);
      expect(ownUsage.windows.map((w: { unit: string; window: string }) => `${w.unit}:${w.window}`)).toEqual([
        "requests:minute",
        "tokens:minute",
      ]);
      expect(ownUsage.windows[0]).toMatchObject({ limit: 30 });
      const badDefaults = await withDefaults(["usage", plain.id], "week=3");
      expect(badDefaults.code).toBe(78);
      expect(badDefaults.stderr).toMatch(/^error: DEFAULT_LIMITS: 'week=3' is not WINDOW=N/);

      const defaults = JSON.parse(
        (await keys(["end-user-limits", "--org", org, "--limit", "end-user:tokens:month=9"])).stdout,
      );
      expect(defaults).toEqual({ org, endUser: { tokens: { month: 9 } } });
      const bad = await keys(["create", "--org", org, "--owner", "bob", "--limit", "tokens:second=5"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/limits\.tokens\.second/);
    });

    it("--cache sets a key's response cache on create and update; off by default, other values refused", async () => {
      const org = freshOrg();
      const plain = JSON.parse((await keys(["create", "--org", org, "--owner", "bob"])).stdout);
      expect(plain.cache).toBe("off");
      const created = JSON.parse(
        (await keys(["create", "--org", org, "--owner", "bob", "--cache", "principal"])).stdout,
      );
      expect(created.cache).toBe("principal");
      const updated = JSON.parse((await keys(["update", created.id, "--cache", "key"])).stdout);
      expect(updated.cache).toBe("key");
      expect((await gw.store.get(created.id))?.cache).toBe("key");
      const bad = await keys(["create", "--org", org, "--owner", "bob", "--cache", "on"]);
      expect(bad.code).toBe(2);
      expect(bad.stdout).toBe("");
      expect(bad.stderr).toMatch(/cache/);
    });

    it("rejects bad input with a message and a non-zero exit, printing nothing on stdout", async () => {
      const cases = [
        { args: ["create", "--owner", "alice"], message: /org: Field required/ },
        {
          args: ["create", "--org", "acme", "--owner", "a", "--permissions", "fly"],
          message: /permissions\.0/,
        },
        { args: ["create", "--org", "acme", "--owner", "a", "--limit", "week=3"], message: /limits\.week/ },
        { args: ["create", "--org", "acme", "--owner", "a", "--limit", "second"], message: /WINDOW=N/ },
        { args: ["frobnicate"], message: /unknown command/ },
        { args: ["create", "--bogus"], message: /bogus/ },
      ];
      // Runs that share nothing: at once.
      const outs = await Promise.all(cases.map((c) => keys(c.args)));
      for (const [i, c] of cases.entries()) {
        const out = outs[i]!;
        expect(out.code, c.args.join(" ")).toBe(2);
        expect(out.stdout).toBe("");
        expect(out.stderr).toMatch(c.message);
      }
      const missing = await keys(["revoke", "key_000000000000000000000000"]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/no API key/);
    });
  });
});

// Commands that need no Redis run once, not per topology.
describe("pnpm keys without Redis", { timeout: RUN_TO_EXIT_TEST_TIMEOUT_MS }, () => {
  const noRedis = { REDIS_URL: "redis://127.0.0.1:1" };

  it("--help prints the usage on stdout and exits 0; no command prints it on stderr and exits 2", async () => {
    const out = await runCli("keys", ["--help"], noRedis, "pnpm");
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^usage:\n {2}pnpm keys create --org ORG --owner USER/);
    expect(out.stderr).toBe("");
    const short = await runCli("keys", ["-h"], noRedis);
    expect(short.code).toBe(0);
    expect(short.stdout).toMatch(/^usage:\n {2}pnpm keys create --org ORG --owner USER/);
    expect(short.stderr).toBe("");
    const none = await runCli("keys", [], noRedis);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe("");
    expect(none.stderr).toMatch(/^usage:/);
    expect(none.stderr).not.toMatch(/cannot reach Redis/);
  });

  it("signing-key prints a JWK Set the gateway accepts as JWT_SIGNING_KEYS, without Redis", async () => {
    const { code, stdout } = await runCli("keys", ["signing-key", "--alg", "EdDSA"], noRedis);
    expect(code).toBe(0);
    const { loadSigningKeys } = await import("../tokens/signing-keys.ts");
    const keys = await loadSigningKeys(stdout);
    expect(keys.active.alg).toBe("EdDSA");
    expect(keys.publicJwks).toHaveLength(1);
  });

  it("says how to fix an unreachable Redis, without printing the URL's credentials", async () => {
    const { code, stderr } = await runToExit(
      [resolve(REPO_ROOT, "packages/gateway/src/cli/keys.ts"), "list", "--org", "a"],
      { ...process.env, REDIS_URL: "redis://operator:hunter2-secret@127.0.0.1:1" },
    );
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot reach Redis at redis:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:1.*pnpm start/);
    expect(stderr).not.toContain("hunter2");
    expect(stderr).not.toContain("operator");
  });
});

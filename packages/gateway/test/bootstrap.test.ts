import { createLogger } from "@gw/core";
import { describe, expect, it } from "vitest";
import { ensureBootstrapAdminKey } from "../src/api-keys/bootstrap.ts";
import { hashSecret } from "../src/api-keys/secret.ts";
import { useGateway } from "./harness.ts";

const BOOTSTRAP = "bootstrap-secret-for-tests-0123456789abcdef";
const gw = useGateway({ GATEWAY_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP, GATEWAY_BOOTSTRAP_ORG: "ops" });
const logger = createLogger("test", "silent");

describe("bootstrap admin key", () => {
  it("exists at start-up with admin:api-keys and can create keys", async () => {
    const whoami = await (await gw.call("/api/v1/authentication/whoami", { bearer: BOOTSTRAP })).json();
    expect(whoami).toMatchObject({ org: "ops", user: "admin" });
    expect(whoami.permissions).toContain("admin:api-keys");
    const res = await gw.call("/api/v1/admin/api-keys", {
      method: "POST",
      bearer: BOOTSTRAP,
      json: { owner: "svc" },
    });
    expect(res.status).toBe(201);
  });

  it("is applied idempotently: a second start (or replica) adds no second key", async () => {
    await Promise.all([
      ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger),
      ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger),
    ]);
    const keys = await gw.store.listByOrg("ops");
    expect(keys.filter((k) => k.hash === hashSecret(BOOTSTRAP))).toHaveLength(1);
  });

  it("gets admin:api-keys back if it lost it, but stays revoked once revoked", async () => {
    const record = (await gw.store.findByHash(hashSecret(BOOTSTRAP)))!;
    await gw.store.update(record.id, { permissions: ["usage:read"] });
    await ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger);
    expect((await gw.store.get(record.id))?.permissions).toEqual(["usage:read", "admin:api-keys"]);

    await gw.store.revoke(record.id);
    await ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger);
    expect((await gw.store.get(record.id))?.status).toBe("revoked");
    await new Promise((r) => setTimeout(r, 50));
    expect((await gw.call("/api/v1/authentication/whoami", { bearer: BOOTSTRAP })).status).toBe(401);
  });
});

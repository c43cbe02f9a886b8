import { createLogger } from "@gw/core/logger";
import { describe, expect, it, vi } from "vitest";
import { useGateway } from "../../test/harness.ts";
import { ensureBootstrapAdminKey } from "./bootstrap.ts";
import { hashSecret } from "./secret.ts";

const BOOTSTRAP = "bootstrap-secret-for-tests-0123456789abcdef";
// The key store (and its atomic create) is tested on a Redis Cluster in api-key-store.test.ts.
describe.each(["single"] as const)("on %s Redis", (topology) => {
  const gw = useGateway(
    { GATEWAY_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP, GATEWAY_BOOTSTRAP_ORG: "ops" },
    undefined,
    topology,
  );
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

    it("is applied idempotently: replicas starting at once, or a restart, add no second key", async () => {
      const fresh = `another-bootstrap-secret-${Date.now()}-0123456789abcdef`;
      const owner = { org: "ops2", user: "admin" };
      // Five replicas racing on a secret none of them has seen: the atomic create lets exactly one win.
      await Promise.all(
        Array.from({ length: 5 }, () => ensureBootstrapAdminKey(gw.store, fresh, owner, logger)),
      );
      await ensureBootstrapAdminKey(gw.store, fresh, owner, logger);
      const keys = await gw.store.listByOrg("ops2");
      expect(keys.filter((k) => k.hash === hashSecret(fresh))).toHaveLength(1);
      expect(keys).toHaveLength(1);
    });

    it("gets admin:api-keys back if it lost it, but stays revoked once revoked", async () => {
      const record = (await gw.store.findByHash(hashSecret(BOOTSTRAP)))!;
      await gw.store.update(record.id, { permissions: ["usage:read"] });
      await ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger);
      expect((await gw.store.get(record.id))?.permissions).toEqual(["usage:read", "admin:api-keys"]);

      await gw.store.revoke(record.id);
      await ensureBootstrapAdminKey(gw.store, BOOTSTRAP, { org: "ops", user: "admin" }, logger);
      expect((await gw.store.get(record.id))?.status).toBe("revoked");
      await vi.waitFor(
        async () =>
          expect((await gw.call("/api/v1/authentication/whoami", { bearer: BOOTSTRAP })).status).toBe(401),
        { timeout: 1_000, interval: 20 },
      );
    });
  });
});

import { ManualClock } from "@gw/core/clock";
import { describe, expect, it } from "vitest";
import { newOrg } from "./authorization-helpers.ts";
import { useGateway } from "./harness.ts";

const HOUR = 3_600_000;
/** The gateway's one clock, passed in where it is wired: it stands still until a test moves it. */
const clock = new ManualClock();
const gw = useGateway({}, undefined, undefined, clock);

const whoami = (secret: string) => gw.call("/api/v1/authentication/whoami", { bearer: secret });
const at = (ms: number) => new Date(ms).toISOString();

describe("the gateway reads time from the one clock it is given", () => {
  it("a key is refused once the clock passes its expiry, with no wait", async () => {
    const { secret } = await gw.createKey({ expiresAt: at(clock.wall() + HOUR) });
    expect((await whoami(secret)).status).toBe(200);
    clock.advance(HOUR - 1_000);
    expect((await whoami(secret)).status).toBe(200);
    clock.advance(1_000);
    expect((await whoami(secret)).status).toBe(401);
  });

  it("an expiry is in the future by the clock: a grant's and a new key's", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f1");
    const grant = (expiresAt: string) =>
      o.grant("alice", { resourceType: "file", resourceId: "f1", userId: "bob", role: "reader", expiresAt });
    const admin = await gw.createKey({ org: o.org, owner: "root", permissions: ["admin:api-keys"] });
    const newKey = (expiresAt: string) =>
      gw.call("/api/v1/admin/api-keys", {
        method: "POST",
        bearer: admin.secret,
        json: { owner: "carol", expiresAt },
      });

    clock.advance(Math.max(0, Date.now() - clock.wall()) + 2 * HOUR);
    // An hour ahead of the real time, but behind the gateway's clock.
    const past = at(Date.now() + HOUR);
    for (const res of [await grant(past), await newKey(past)]) {
      expect(res.status).toBe(422);
      expect((await res.json()).detail).toEqual([expect.objectContaining({ loc: ["body", "expiresAt"] })]);
    }
    const ahead = at(clock.wall() + HOUR);
    expect((await grant(ahead)).status).toBe(204);
    expect((await newKey(ahead)).status).toBe(201);
  });
});

import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { freshOrg, useGateway } from "../../test/harness.ts";
import { addressKey } from "./sign-in-limits.ts";

/**
 * Failed admin console sign-ins are limited per client address and per
 * organization (counted in Redis, so across replicas), with 429 and
 * `Retry-After`. Each test signs in from addresses of its own (127.0.0.x:
 * every loopback address reaches the gateway, each is a client of its own).
 */
const PER_ADDRESS = 3;
const PER_ORG = 5;
const gw = useGateway({
  CONSOLE_SIGN_IN_FAILURES_PER_ADDRESS: String(PER_ADDRESS),
  CONSOLE_SIGN_IN_FAILURES_PER_ORG: String(PER_ORG),
  CONSOLE_SIGN_IN_WINDOW: "15m",
});

let nextAddress = 2;
/** A loopback address no other test signs in from. */
const freshAddress = () => `127.0.0.${nextAddress++}`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request to the gateway from `localAddress`. */
function from(
  localAddress: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: hostname, port, path, method: init.method ?? "GET", headers: init.headers, localAddress },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

/** A sign-in through the form, as a browser sends it (`accept`: what it prefers), from `address`. */
async function signIn(address: string, secret: string, accept = "text/html,*/*;q=0.8"): Promise<Answer> {
  const form = await from(address, "/admin/sign-in");
  const token = /name="csrf" value="([^"]+)"/.exec(form.body)![1]!;
  const cookie = ((form.headers["set-cookie"] as string[] | undefined) ?? [])
    .map((c) => c.split(";")[0])
    .join("; ");
  return from(address, "/admin/sign-in", {
    method: "POST",
    headers: {
      "Content-Type": "application/x-www-form-urlencoded",
      Accept: accept,
      Cookie: cookie,
      Origin: new URL(gw.url).origin,
    },
    body: new URLSearchParams({ csrf: token, key: secret }).toString(),
  });
}

const signedIn = (a: Answer) => a.status === 303 && a.headers.location === "/admin/keys";
const sessionSet = (a: Answer) =>
  ((a.headers["set-cookie"] as string[] | undefined) ?? []).some((c) => c.startsWith("gw_console="));

/** One sample of the gateway's /metrics (0 when absent). */
async function signIns(outcome: string): Promise<number> {
  const text = await (await fetch(gw.metricsUrl)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`gateway_console_sign_ins_total{outcome="${outcome}"}`));
  return line ? Number(line.split(" ")[1]) : 0;
}

const consoleKey = (org: string, owner = "alice") =>
  gw.createKey({ org, owner, permissions: ["admin:console", "admin:api-keys"] });

describe("console sign-in limits", () => {
  it("refuse an address after too many failed sign-ins, right key or not, with 429 and Retry-After, and a page saying so", async () => {
    const { secret } = await consoleKey(freshOrg());
    const address = freshAddress();
    const [limited, invalid] = await Promise.all([signIns("limited_address"), signIns("invalid_key")]);
    // Successes count for nothing.
    for (let i = 0; i < PER_ADDRESS + 2; i++) expect(signedIn(await signIn(address, secret))).toBe(true);
    for (let i = 0; i < PER_ADDRESS; i++) {
      const wrong = await signIn(address, `gwsk_wrong-${i}`);
      expect(wrong.headers.location).toBe("/admin/sign-in?failed=invalid");
    }
    const refused = await signIn(address, secret);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(15 * 60);
    expect(sessionSet(refused)).toBe(false);
    expect(refused.headers["content-type"]).toMatch(/^text\/html/);
    expect(refused.body).toContain('role="alert"');
    expect(refused.body).toMatch(/Too many failed sign-in attempts\. Wait 1[45] minutes, then try again\./);
    expect(refused.body).toContain('name="csrf"'); // the form, to try again later
    // A client that is no browser gets the catalogue's 429.
    const json = await signIn(address, secret, "application/json");
    expect(json.status).toBe(429);
    expect(JSON.parse(json.body)).toEqual({ error: "Rate limit exceeded" });
    expect(Number(json.headers["retry-after"])).toBeGreaterThan(0);
    // Another address is not held up.
    expect(signedIn(await signIn(freshAddress(), secret))).toBe(true);
    expect(await signIns("limited_address")).toBe(limited + 2);
    expect(await signIns("invalid_key")).toBe(invalid + PER_ADDRESS);
  });

  it("count concurrent attempts together: of many wrong keys sent at once, only the limit is tried", async () => {
    const address = freshAddress();
    const answers = await Promise.all(
      Array.from({ length: 4 * PER_ADDRESS }, (_, i) => signIn(address, `gwsk_wrong-${i}`)),
    );
    expect(answers.filter((a) => a.headers.location === "/admin/sign-in?failed=invalid")).toHaveLength(
      PER_ADDRESS,
    );
    expect(answers.filter((a) => a.status === 429)).toHaveLength(3 * PER_ADDRESS);
  });

  it("refuse an organization's keys after too many failures with its keys from any address, not another organization's", async () => {
    const org = freshOrg();
    const { secret: valid } = await consoleKey(org);
    const { secret: lacking } = await gw.createKey({ org, owner: "mallory", permissions: ["usage:read"] });
    const other = await consoleKey(freshOrg(), "bob");
    const limited = await signIns("limited_organization");
    // Unknown secrets name no organization, however many and from however many addresses.
    for (let i = 0; i < PER_ORG + 1; i++) await signIn(freshAddress(), `gwsk_unknown-${i}`);
    expect(signedIn(await signIn(freshAddress(), valid))).toBe(true);
    // A key of the organization that may not sign in, from several addresses, each under its own limit.
    for (let i = 0; i < PER_ORG; i++) {
      const refused = await signIn(freshAddress(), lacking);
      expect(refused.headers.location).toBe("/admin/sign-in?failed=permission");
    }
    const fresh = freshAddress();
    const held = await signIn(fresh, valid);
    expect(held.status).toBe(429);
    expect(Number(held.headers["retry-after"])).toBeGreaterThan(0);
    expect(sessionSet(held)).toBe(false);
    expect(await signIns("limited_organization")).toBe(limited + 1);
    // The same address signs in with another organization's key.
    expect(signedIn(await signIn(fresh, other.secret))).toBe(true);
  });

  it("count an IPv4 address mapped into IPv6 as itself, and an IPv6 address by its /64", () => {
    expect(addressKey("::ffff:127.0.0.9")).toBe("127.0.0.9");
    expect(addressKey("203.0.113.7")).toBe("203.0.113.7");
    expect(addressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:DB8::1%eth0")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
  });
});

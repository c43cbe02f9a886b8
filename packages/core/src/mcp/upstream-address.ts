import { lookup as dnsLookup } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { Agent } from "undici";

/**
 * Where the gateway may connect for a user-registered MCP server (no SSRF):
 * an `https` URL whose every address is public. Checked when a server is
 * registered or changed, and again on every connection (a name may resolve
 * elsewhere later: DNS rebinding), and the connection uses the very address
 * that was checked. `MCP_ALLOW_PRIVATE_UPSTREAMS` lifts both rules (https and
 * the address check), for development and tests; a URL that is not
 * `http(s)` is refused either way.
 */

/** A refused upstream URL or address, with why (shown to the caller: it names only what they typed). */
export class UpstreamRefused extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "UpstreamRefused";
  }
}

/** Loopback, private, link-local (metadata), shared, reserved, documentation and multicast ranges. */
const BLOCKED = (() => {
  const list = new BlockList();
  for (const [net, prefix] of [
    ["0.0.0.0", 8],
    ["10.0.0.0", 8],
    ["100.64.0.0", 10],
    ["127.0.0.0", 8],
    ["169.254.0.0", 16],
    ["172.16.0.0", 12],
    ["192.0.0.0", 24],
    ["192.0.2.0", 24],
    ["192.88.99.0", 24],
    ["192.168.0.0", 16],
    ["198.18.0.0", 15],
    ["198.51.100.0", 24],
    ["203.0.113.0", 24],
    ["224.0.0.0", 4],
    ["240.0.0.0", 4],
  ] as const)
    list.addSubnet(net, prefix, "ipv4");
  for (const [net, prefix] of [
    ["::", 128],
    ["::1", 128],
    ["64:ff9b::", 96],
    ["64:ff9b:1::", 48],
    ["100::", 64],
    ["2001::", 23],
    ["2001:db8::", 32],
    ["2002::", 16],
    ["fc00::", 7],
    ["fe80::", 10],
    ["fec0::", 10],
    ["ff00::", 8],
  ] as const)
    list.addSubnet(net, prefix, "ipv6");
  return list;
})();

/** Why an address may not be connected to, or undefined when it is public. */
export function blockedAddress(address: string): string | undefined {
  const family = isIP(address);
  if (family === 0) return `${address} is not an IP address`;
  if (family === 6) {
    // An IPv4 address written as IPv6 (::ffff:127.0.0.1, ::127.0.0.1) is judged as the IPv4 address.
    const embedded = /^::(?:ffff:(?:0:)?)?(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    if (embedded) return blockedAddress(embedded);
    const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
    if (hex) {
      const n = (Number.parseInt(hex[1]!, 16) << 16) | Number.parseInt(hex[2]!, 16);
      return blockedAddress([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join("."));
    }
  }
  if (BLOCKED.check(address, family === 4 ? "ipv4" : "ipv6")) {
    return `it resolves to ${address}, a loopback, private, link-local or otherwise non-public address`;
  }
  return undefined;
}

/** How names are resolved: every address of a name (tests give their own). */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    ),
  );

export interface UpstreamPolicyOptions {
  /** `MCP_ALLOW_PRIVATE_UPSTREAMS`: http and any address allowed. */
  allowPrivate: boolean;
  resolver?: Resolver;
}

/** The URL rules and the address check, at registration and on every connection. */
export class UpstreamPolicy {
  readonly allowPrivate: boolean;
  private readonly resolver: Resolver;

  constructor(options: UpstreamPolicyOptions) {
    this.allowPrivate = options.allowPrivate;
    this.resolver = options.resolver ?? systemResolver;
  }

  /** The URL's form: http(s) only, https unless private upstreams are allowed, no credentials, no fragment. */
  checkForm(text: string): URL {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new UpstreamRefused("not a valid URL");
    }
    if (url.protocol !== "https:" && url.protocol !== "http:")
      throw new UpstreamRefused("the URL must be http(s)");
    if (url.protocol !== "https:" && !this.allowPrivate)
      throw new UpstreamRefused("the URL must be https (MCP_ALLOW_PRIVATE_UPSTREAMS is off)");
    if (url.username || url.password)
      throw new UpstreamRefused("the URL must not carry credentials: store them with PUT …/credentials");
    if (url.hash) throw new UpstreamRefused("the URL must not have a fragment");
    return url;
  }

  /** `checkForm`, then every address the host resolves to must be public (unless private upstreams are allowed). */
  async check(text: string): Promise<URL> {
    const url = this.checkForm(text);
    if (!this.allowPrivate) await this.addresses(hostOf(url));
    return url;
  }

  /**
   * The addresses of `host`, each checked; refuses if any is not public (a
   * name with one private address among public ones is refused whole).
   */
  async addresses(host: string): Promise<{ address: string; family: number }[]> {
    if (isIP(host)) {
      const refused = this.allowPrivate ? undefined : blockedAddress(host);
      if (refused) throw new UpstreamRefused(refused);
      return [{ address: host, family: isIP(host) }];
    }
    let found: { address: string; family: number }[];
    try {
      found = await this.resolver(host);
    } catch {
      throw new UpstreamRefused(`the host ${host} does not resolve`);
    }
    if (found.length === 0) throw new UpstreamRefused(`the host ${host} does not resolve`);
    if (!this.allowPrivate) {
      for (const { address } of found) {
        const refused = blockedAddress(address);
        if (refused) throw new UpstreamRefused(refused);
      }
    }
    return found;
  }

  /** A `lookup` for sockets: the checked addresses, so a connection goes exactly where the check looked. */
  lookup(): LookupFunction {
    return (hostname, options, callback) => {
      this.addresses(hostname).then(
        (found) => {
          const wanted =
            options.family === 4 || options.family === 6
              ? found.filter((a) => a.family === options.family)
              : found;
          if (wanted.length === 0) {
            callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 4);
          } else if (options.all) {
            (callback as unknown as (e: null, a: typeof wanted) => void)(null, wanted);
          } else {
            callback(null, wanted[0]!.address, wanted[0]!.family);
          }
        },
        (err: Error) => callback(Object.assign(err, { code: "EUPSTREAMREFUSED" }), "", 4),
      );
    };
  }

  /**
   * An HTTP dispatcher whose every new connection resolves through
   * `lookup` (checked addresses only, the checked address used).
   */
  dispatcher(timeoutMs: number): Agent {
    return new Agent({
      connect: { lookup: this.lookup(), timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }
}

/** The host as the resolver takes it: IPv6 literals without their brackets. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1");

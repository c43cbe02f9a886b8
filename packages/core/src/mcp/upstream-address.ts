import { lookup as dnsLookup } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { Agent, buildConnector } from "undici";

/**
 * Where the platform may connect for an address a user typed (no SSRF): a
 * registered MCP server, or an organization's own provider `base_url`:
 * an `https` URL whose every address is public. Checked when a server is
 * registered or changed, and again on every connection, an IP literal as
 * much as a name (a server stored while the rules were lifted, a name that
 * resolves elsewhere later: DNS rebinding), and the connection uses the very
 * address that was checked. `MCP_ALLOW_PRIVATE_UPSTREAMS` (for MCP servers)
 * and `BYOK_ALLOW_PRIVATE_BASE_URLS` (for provider keys) lift both rules
 * (https and the address check), for development and tests; a URL that is
 * not `http(s)` is refused either way.
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

/**
 * The IPv4 address an IPv6 address carries, if it is one written as IPv6:
 * IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`) or
 * IPv4-compatible (`::a.b.c.d`), in whatever form it was typed (the URL
 * parser rewrites `::127.0.0.1` to `::7f00:1`): read from the address's
 * sixteen bytes, not its text.
 */
function embeddedIPv4(address: string): string | undefined {
  const words = ipv6Words(address);
  const zero = (n: number) => words.slice(0, n).every((w) => w === 0);
  const mapped = zero(5) && words[5] === 0xffff;
  const translated = zero(4) && words[4] === 0xffff && words[5] === 0;
  // `::` and `::1` are IPv6's own unspecified and loopback addresses, judged as such.
  const compatible = zero(6) && !(words[6] === 0 && words[7]! <= 1);
  if (!mapped && !translated && !compatible) return undefined;
  return [words[6]! >> 8, words[6]! & 255, words[7]! >> 8, words[7]! & 255].join(".");
}

/** The eight 16-bit words of a valid IPv6 address, through the URL parser's own canonical form. */
function ipv6Words(address: string): number[] {
  // WHATWG's serialization: hex words only (no dotted quad), `::` for the longest run of zeros.
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = "", tail] = canonical.split("::");
  const words = (part: string) => (part ? part.split(":").map((w) => Number.parseInt(w, 16)) : []);
  const first = words(head);
  const last = tail === undefined ? [] : words(tail);
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last];
}

/** Why an address may not be connected to, or undefined when it is public. */
export function blockedAddress(address: string): string | undefined {
  // A zone (`fe80::1%eth0`) names an interface, not an address.
  const bare = address.split("%")[0]!;
  const family = isIP(bare);
  if (family === 0) return `${address} is not an IP address`;
  const v4 = family === 6 ? embeddedIPv4(bare) : undefined;
  // An IPv4 address written as IPv6 is judged as the IPv4 address it is.
  const blocked = v4 ? BLOCKED.check(v4, "ipv4") : BLOCKED.check(bare, family === 4 ? "ipv4" : "ipv6");
  if (blocked) {
    const named = v4 ? `${address} (${v4})` : address;
    return `it resolves to ${named}, a loopback, private, link-local or otherwise non-public address`;
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
  /** `MCP_ALLOW_PRIVATE_UPSTREAMS` (or the setting named by `allowPrivateSetting`): http and any address allowed. */
  allowPrivate: boolean;
  /** The setting that lifts the rules, as a refusal names it. Default `MCP_ALLOW_PRIVATE_UPSTREAMS`. */
  allowPrivateSetting?: string;
  resolver?: Resolver;
  /**
   * The deployment's own address (the service's `GATEWAY_URL`, set by configuration, never by a
   * user): connections to exactly this origin skip the address rules, as the service's hosted MCP
   * tools reach the gateway at an internal address. Any other origin, on the same host or not, is
   * checked as usual.
   */
  internalOrigin?: string;
}

/** How undici opens a connection (`buildConnector`'s result), in whichever undici version builds it. */
type Connect<O extends { protocol: string; hostname: string }, S> = (
  options: O,
  callback: (...args: [Error, null] | [null, S]) => void,
) => void;

/** The URL rules and the address check, at registration and on every connection. */
export class UpstreamPolicy {
  readonly allowPrivate: boolean;
  private readonly allowPrivateSetting: string;
  private readonly resolver: Resolver;
  private readonly internal: { protocol: string; host: string; port: string } | undefined;

  constructor(options: UpstreamPolicyOptions) {
    this.allowPrivate = options.allowPrivate;
    this.allowPrivateSetting = options.allowPrivateSetting ?? "MCP_ALLOW_PRIVATE_UPSTREAMS";
    this.resolver = options.resolver ?? systemResolver;
    if (options.internalOrigin !== undefined) {
      const url = new URL(options.internalOrigin);
      if (url.protocol !== "http:" && url.protocol !== "https:")
        throw new Error("the internal origin must be an http(s) URL");
      this.internal = { protocol: url.protocol, host: hostOf(url), port: portOf(url.protocol, url.port) };
    }
  }

  /** Whether a connection goes to exactly the configured internal origin (scheme, host as written, port). */
  isInternal(options: { protocol: string; hostname: string; port?: string | number | null }): boolean {
    const internal = this.internal;
    if (!internal) return false;
    return (
      options.protocol === internal.protocol &&
      hostOf(options) === internal.host &&
      portOf(options.protocol, String(options.port ?? "")) === internal.port
    );
  }

  /** The URL's form: http(s) only, https unless private upstreams are allowed, no credentials, no fragment. */
  checkForm(text: string): URL {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new UpstreamRefused("not a valid URL");
    }
    const scheme = this.schemeRefusal(url.protocol);
    if (scheme) throw new UpstreamRefused(scheme);
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
   * Why a connection to `host` over `protocol` may not be made, asked for
   * every connection: the scheme, and an IP literal's address (a name's
   * addresses are checked as it resolves, in `lookup`, which sockets skip
   * for an IP literal).
   */
  connectionRefusal(protocol: string, host: string): string | undefined {
    const scheme = this.schemeRefusal(protocol);
    if (scheme || this.allowPrivate) return scheme;
    return isIP(host) ? blockedAddress(host) : undefined;
  }

  private schemeRefusal(protocol: string): string | undefined {
    if (protocol !== "https:" && protocol !== "http:") return "the URL must be http(s)";
    if (protocol !== "https:" && !this.allowPrivate)
      return `the URL must be https (${this.allowPrivateSetting} is off)`;
    return undefined;
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
   * An HTTP dispatcher whose every new connection is checked first
   * (`connectionRefusal`) and resolves through `lookup` (checked addresses
   * only, the checked address used). `tls.ca`: certificates trusted instead of
   * the system's (tests' self-signed servers).
   */
  dispatcher(timeoutMs: number, tls: { ca?: string } = {}): Agent {
    const checked = this.guard(buildConnector({ lookup: this.lookup(), timeout: timeoutMs, ...tls }));
    // The internal origin resolves as the system does: it is the deployment's own, not a user's.
    const internal = this.internal ? buildConnector({ timeout: timeoutMs, ...tls }) : undefined;
    return new Agent({
      connect: internal
        ? (options, callback) => (this.isInternal(options) ? internal : checked)(options, callback)
        : checked,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }

  /**
   * `connect` checked first (`connectionRefusal`) for every new connection:
   * for an agent of another undici than this package's (the service's), whose
   * connector is built with `lookup()` so it resolves to checked addresses only.
   */
  guard<O extends { protocol: string; hostname: string }, S>(connect: Connect<O, S>): Connect<O, S> {
    return (options, callback) => {
      const refused = this.connectionRefusal(options.protocol, hostOf(options));
      if (!refused) return connect(options, callback);
      callback(Object.assign(new UpstreamRefused(refused), { code: "EUPSTREAMREFUSED" }), null);
    };
  }
}

/** A URL's port, its scheme's default when it names none. */
const portOf = (protocol: string, port: string) => port || (protocol === "https:" ? "443" : "80");

/** The host as the resolver takes it: IPv6 literals without their brackets. */
export const hostOf = (url: { hostname: string }) => url.hostname.replace(/^\[(.*)\]$/, "$1");

/**
 * What a refusal may show of an upstream URL a client sent: the URL without
 * its user and password, which may be a secret (a URL that carries none, as
 * sent); nothing when it cannot be parsed and holds an `@`, before which a
 * password may sit.
 */
export function urlWithoutCredentials(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text.includes("@") ? undefined : text;
  }
  if (!url.username && !url.password) return text;
  url.username = "";
  url.password = "";
  return url.href;
}

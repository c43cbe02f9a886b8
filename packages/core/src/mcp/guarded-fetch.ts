import { fetch as undiciFetch } from "undici";
import { readBoundedJson } from "./bounded-body.ts";
import { type UpstreamPolicy, UpstreamRefused } from "./upstream-address.ts";

/**
 * GETs (or, with `form`, POSTs a form to) a JSON document at a URL someone
 * else chose (an OAuth client's metadata document, an organization's OpenID
 * provider) through `policy`: the URL's form and every address it
 * resolves to are checked, the connection goes to the checked address, no
 * redirect is followed, and the body is read up to `maxBytes`. Refusals and
 * failures are `UpstreamRefused` with a reason that names only the URL.
 */
export async function fetchGuardedJson(
  policy: UpstreamPolicy,
  url: string,
  options: {
    timeoutMs: number;
    maxBytes: number;
    ca?: string | undefined;
    /** A form to POST, with extra request headers (a client's credentials). */
    form?: { body: URLSearchParams; headers?: Record<string, string> } | undefined;
  },
): Promise<unknown> {
  const checked = await policy.check(url);
  const dispatcher = policy.dispatcher(options.timeoutMs, options.ca ? { ca: options.ca } : {});
  try {
    const response = await undiciFetch(checked, {
      dispatcher,
      redirect: "manual",
      ...(options.form
        ? {
            method: "POST",
            body: options.form.body.toString(),
            headers: {
              accept: "application/json",
              "content-type": "application/x-www-form-urlencoded",
              ...options.form.headers,
            },
          }
        : { headers: { accept: "application/json" } }),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      throw new UpstreamRefused(`it answered HTTP ${response.status}`);
    }
    try {
      return await readBoundedJson(response as unknown as Response, options.maxBytes);
    } catch {
      throw new UpstreamRefused(`its answer is not a JSON document of at most ${options.maxBytes} bytes`);
    }
  } catch (err) {
    if (err instanceof UpstreamRefused) throw err;
    const refused = findRefusal(err);
    throw refused ?? new UpstreamRefused("it could not be reached");
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

function findRefusal(err: unknown): UpstreamRefused | undefined {
  for (let e = err; e instanceof Error; e = e.cause) if (e instanceof UpstreamRefused) return e;
  return undefined;
}

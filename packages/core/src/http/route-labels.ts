import type express from "express";
import { pathToRegexp } from "path-to-regexp";

/** One endpoint: its method and its path template with mount paths, e.g. `GET /api/v1/llm/conversations/:id`. */
export interface RouteTemplate {
  method: string;
  path: string;
}

/** What `listRoutes` (router 2.3, Express 5's router) tells of each route and mounted router. */
interface ListedRoute {
  path: string | RegExp;
  methods: string[] | undefined;
  router: RouterLike | undefined;
}
interface RouterLike {
  listRoutes?(): ListedRoute[];
}

/** Every route an Express app serves, with its full path template; `HEAD` of a `GET` is left out. */
export function routesOf(app: express.Express): RouteTemplate[] {
  const walk = (router: RouterLike, base: string): RouteTemplate[] =>
    (router.listRoutes?.() ?? []).flatMap((listed) => {
      if (typeof listed.path !== "string") return [];
      const path = `${base}${listed.path === "/" && listed.router ? "" : listed.path}`;
      if (listed.router) return walk(listed.router, path);
      return (listed.methods ?? [])
        .filter((method) => method !== "HEAD" && method !== "*")
        .map((method) => ({ method, path }));
    });
  return walk((app as unknown as { router: RouterLike }).router, "");
}

/**
 * The `route` label of a request: the template of the endpoint its method
 * and path belong to, whatever its outcome (a 401 or 429 is answered before
 * any route runs, a 403 or 422 after Express has left the route) and
 * wherever it is served (forwarded requests match the service's templates).
 * Paths no endpoint serves are `unmatched`, so labels stay a closed set.
 */
export class RouteLabels {
  /** Templates without parameters, by `METHOD path` in lower case: most requests, one lookup. */
  private readonly fixed = new Map<string, string>();
  private readonly patterns: { method: string; regexp: RegExp; path: string }[] = [];
  private readonly methods = new Set<string>();

  constructor(routes: readonly RouteTemplate[]) {
    for (const { method, path } of routes) {
      this.methods.add(method);
      if (!path.includes(":") && !path.includes("*")) {
        const key = `${method} ${normalize(path)}`;
        if (!this.fixed.has(key)) this.fixed.set(key, path);
      } else {
        const { regexp } = pathToRegexp(path, { end: true, trailing: true, sensitive: false });
        this.patterns.push({ method, regexp, path });
      }
    }
  }

  /** The template of `method` `url` (query ignored), or `unmatched`. */
  label(method: string, url: string): string {
    const verb = method === "HEAD" ? "GET" : method;
    const query = url.indexOf("?");
    const path = query === -1 ? url : url.slice(0, query);
    const fixed = this.fixed.get(`${verb} ${normalize(path)}`);
    if (fixed) return fixed;
    for (const pattern of this.patterns) {
      if (pattern.method === verb && pattern.regexp.test(path)) return pattern.path;
    }
    return "unmatched";
  }

  /** The methods some endpoint serves `url` with (`HEAD` with `GET`), sorted; none for a path no endpoint serves. */
  allowed(url: string): string[] {
    const allowed = [...this.methods].filter((method) => this.label(method, url) !== "unmatched");
    if (allowed.includes("GET")) allowed.push("HEAD");
    return allowed.sort();
  }
}

const normalize = (path: string) => (path.length > 1 ? path.replace(/\/+$/, "") : path).toLowerCase();

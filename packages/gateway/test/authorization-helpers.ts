import { randomBytes } from "node:crypto";
import type { ResourceType, Role } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import type { GatewayHarness } from "./harness.ts";
import { freshOrg } from "./harness.ts";

export const FORBIDDEN_BODY = {
  error: "Forbidden",
  message: "Only resource owners can grant or revoke permissions",
};

export interface Org {
  org: string;
  secret: string;
  keyId: string;
  /** Grant as `actor` (the end user in X-On-Behalf-Of). */
  grant(actor: string, body: Record<string, unknown>): Promise<Response>;
  revoke(actor: string, body: Record<string, unknown>): Promise<Response>;
  /** `allowed` for `actor`, or the whole response when it is not 200. */
  check(actor: string, type: string, id: string, role: string): Promise<boolean>;
  checkResponse(actor: string, query: Record<string, string>): Promise<Response>;
  /** Makes `user` the owner of a new resource, as the service does on creation. */
  create(user: string, type?: ResourceType, id?: string): Promise<string>;
  /** The resources API, as `actor`. */
  register(actor: string, resourceType: string, resourceId: string): Promise<Response>;
  deleteResource(actor: string, resourceType: string, resourceId: string): Promise<Response>;
  list(actor: string, query: Record<string, string>): Promise<Response>;
  grants(actor: string, resourceType: string, resourceId: string): Promise<Response>;
  audit(
    actor: string,
    resourceType: string,
    resourceId: string,
    query?: Record<string, string>,
  ): Promise<Response>;
}

/** A fresh organization with one server key; its end users act through X-On-Behalf-Of. */
export async function newOrg(gw: GatewayHarness, org = freshOrg()): Promise<Org> {
  const { record, secret } = await gw.createKey({ org, owner: "backend" });
  const as = (actor: string) => ({ bearer: secret, headers: { "x-on-behalf-of": actor } });
  const resourcePath = (type: string, id: string) =>
    `/api/v1/authorization/llm/resources/${encodeURIComponent(type)}/${encodeURIComponent(id)}`;
  const checkResponse = (actor: string, query: Record<string, string>) =>
    gw.call(`/api/v1/authorization/llm/check?${new URLSearchParams(query)}`, as(actor));
  return {
    org,
    secret,
    keyId: record.id,
    grant: (actor, body) =>
      gw.call("/api/v1/authorization/llm/grant", { method: "POST", json: body, ...as(actor) }),
    revoke: (actor, body) =>
      gw.call("/api/v1/authorization/llm/revoke", { method: "POST", json: body, ...as(actor) }),
    checkResponse,
    register: (actor, resourceType, resourceId) =>
      gw.call("/api/v1/authorization/llm/resources", {
        method: "POST",
        json: { resourceType, resourceId },
        ...as(actor),
      }),
    deleteResource: (actor, type, id) => gw.call(resourcePath(type, id), { method: "DELETE", ...as(actor) }),
    list: (actor, query) =>
      gw.call(`/api/v1/authorization/llm/resources?${new URLSearchParams(query)}`, as(actor)),
    grants: (actor, type, id) => gw.call(`${resourcePath(type, id)}/grants`, as(actor)),
    audit: (actor, type, id, query = {}) =>
      gw.call(`${resourcePath(type, id)}/audit?${new URLSearchParams(query)}`, as(actor)),
    async check(actor, resourceType, resourceId, role) {
      const res = await checkResponse(actor, { resourceType, resourceId, role });
      if (res.status !== 200) throw new Error(`check answered ${res.status}: ${await res.text()}`);
      const body = await res.json();
      return body.allowed;
    },
    async create(
      user,
      type = "conversation",
      id = `${type === "conversation" ? "conv" : type}_${randomBytes(6).toString("hex")}`,
    ) {
      const principal: Principal = {
        org,
        user,
        keyId: record.id,
        permissions: [],
        credential: "api_key",
        onBehalfOf: true,
      };
      await gw.authorization.createOwnership(principal, { type, id });
      return id;
    },
  };
}

export const RANK: Record<Role | "none", number> = { none: 0, reader: 1, writer: 2, owner: 3 };

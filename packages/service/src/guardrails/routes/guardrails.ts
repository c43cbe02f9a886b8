import { notFound } from "@gw/core/errors";
import { evaluate } from "@gw/core/guardrails";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../../pagination.ts";
import { type GuardrailRouteDeps, guardrailRole, TAG } from "./deps.ts";
import {
  createGuardrailBody,
  evaluateGuardrailBody,
  guardrail,
  guardrailEvaluation,
  guardrailList,
  updateGuardrailBody,
} from "./schemas.ts";

/** Readable guardrails looked at for one list at most; beyond them the list is cut (and says `has_more`). */
export const MAX_LISTED_GUARDRAILS = 10_000;
// SpiceDB takes at most 1000 per call, and `lookup` asks for one more than its page.
const LOOKUP_PAGE = 999;

/**
 * `POST /api/v1/guardrails` `{name, checks, applies_to, action}` → 200 the
 * guardrail. The principal (the end user of `X-On-Behalf-Of`, else the key's
 * owner) owns it; it applies to no call until it is attached.
 */
export const createGuardrail = defineRoute({
  method: "POST",
  path: "/api/v1/guardrails",
  operationId: "createGuardrail",
  summary: "Create a guardrail; the principal becomes its owner",
  description: "It applies to no call until attached (`PUT /api/v1/guardrails/{id}/attachments`).",
  tag: TAG,
  permission: "guardrails:write",
  body: createGuardrailBody,
  responses: ok("The guardrail", guardrail),
  handler: async ({ principal, body, req }, deps: GuardrailRouteDeps) =>
    deps.guardrails.create({ principal, requestId: String(req.id) }, body),
});

/**
 * `GET /api/v1/guardrails?limit&after&order`: the guardrails the principal
 * may read (SpiceDB's LookupResources: those shared with it included),
 * newest first unless `order=asc`.
 */
export const listGuardrails = defineRoute({
  method: "GET",
  path: "/api/v1/guardrails",
  operationId: "listGuardrails",
  summary: "The guardrails the principal may read",
  tag: TAG,
  permission: "guardrails:read",
  query: pageQuery,
  responses: ok("A page of guardrails", guardrailList),
  handler: async ({ principal, query: q }, deps: GuardrailRouteDeps) => {
    const ids: string[] = [];
    let after: string | undefined;
    let more = true;
    while (more && ids.length < MAX_LISTED_GUARDRAILS) {
      const page = await deps.authorization.lookup(principal, "guardrail", "reader", {
        limit: LOOKUP_PAGE,
        after,
      });
      ids.push(...page.resourceIds);
      after = page.resourceIds.at(-1);
      more = page.more && after !== undefined;
    }
    const found = await deps.guardrails.store.getMany(principal.org, ids.slice(0, MAX_LISTED_GUARDRAILS));
    const page = pageOf(found, q);
    if (!page) throw unknownAfter(q.after);
    return listBody(page.items, page.hasMore || more);
  },
});

/** `GET /api/v1/guardrails/{id}`: the guardrail; needs reader. */
export const getGuardrail = defineRoute({
  method: "GET",
  path: "/api/v1/guardrails/:id",
  operationId: "getGuardrail",
  summary: "A guardrail (reader)",
  tag: TAG,
  permission: "guardrails:read",
  responses: ok("The guardrail", guardrail),
  errors: ["not_found"],
  authorize: guardrailRole("reader"),
  handler: async ({ principal, params }, deps: GuardrailRouteDeps) => {
    const found = await deps.guardrails.store.get(principal.org, params.id!);
    if (!found) throw notFound(`No guardrail ${params.id}`);
    return found;
  },
});

/**
 * `PATCH /api/v1/guardrails/{id}` `{name?, checks?, applies_to?, action?}`
 * → the guardrail; needs writer. The fields given replace the guardrail's;
 * every replica applies the change from its next call on.
 */
export const updateGuardrail = defineRoute({
  method: "PATCH",
  path: "/api/v1/guardrails/:id",
  operationId: "updateGuardrail",
  summary: "Change a guardrail's name, checks, where they apply or its action (writer)",
  description:
    "Changing the checks, `applies_to` or `action` of a guardrail attached to its organization, a model or another user's key needs `admin:api-keys` as well, as detaching it from there does.",
  tag: TAG,
  permission: "guardrails:write",
  body: updateGuardrailBody,
  responses: ok("The guardrail", guardrail),
  errors: ["not_found"],
  authorize: guardrailRole("writer"),
  handler: async ({ principal, params, body, req }, deps: GuardrailRouteDeps) => {
    const updated = await deps.guardrails.update({ principal, requestId: String(req.id) }, params.id!, body);
    if (!updated) throw notFound(`No guardrail ${params.id}`);
    return updated;
  },
});

/**
 * `DELETE /api/v1/guardrails/{id}` → `{id, object: "guardrail.deleted",
 * deleted: true}`; needs owner, and what detaching it from each place it is
 * attached needs (`admin:api-keys` beyond the owner's own keys).
 */
export const deleteGuardrail = defineRoute({
  method: "DELETE",
  path: "/api/v1/guardrails/:id",
  operationId: "deleteGuardrail",
  summary: "Delete a guardrail with its attachments and relationships (owner)",
  description:
    "A guardrail attached to its organization, a model or another user's key is detached by its deletion: that needs `admin:api-keys` too.",
  tag: TAG,
  permission: "guardrails:write",
  responses: ok("Deleted", deletedSchema("guardrail.deleted")),
  errors: ["not_found"],
  authorize: guardrailRole("owner"),
  handler: async ({ principal, params, req }, deps: GuardrailRouteDeps) => {
    const id = params.id!;
    if (!(await deps.guardrails.delete({ principal, requestId: String(req.id) }, id)))
      throw notFound(`No guardrail ${id}`);
    return { id, object: "guardrail.deleted", deleted: true };
  },
});

/**
 * `POST /api/v1/guardrails/{id}/evaluate` `{text, direction}` → the decisions
 * the guardrail's checks make on `text` (the console's "try a text"); needs
 * reader. Like a call's decisions, they name the check and what kind of thing
 * it found, never the text; nothing is stored, audited or counted, and the
 * guardrail need not be attached anywhere.
 */
export const evaluateGuardrail = defineRoute({
  method: "POST",
  path: "/api/v1/guardrails/:id/evaluate",
  operationId: "evaluateGuardrail",
  summary: "Try a text against a guardrail's checks (reader)",
  description:
    "`system_prompt_leakage` needs a request's instructions and finds nothing here; `applies_to` is not consulted, so a check can be tried in either direction.",
  tag: TAG,
  permission: "guardrails:read",
  body: evaluateGuardrailBody,
  responses: ok("The decisions", guardrailEvaluation),
  errors: ["not_found"],
  authorize: guardrailRole("reader"),
  handler: async ({ principal, params, body }, deps: GuardrailRouteDeps) => {
    const found = await deps.guardrails.store.get(principal.org, params.id!);
    if (!found) throw notFound(`No guardrail ${params.id}`);
    const { decisions } = evaluate(
      [{ id: found.id, checks: found.checks, applies_to: "both", action: found.action }],
      body.text,
      { direction: body.direction },
    );
    return {
      object: "guardrail.evaluation",
      guardrail_id: found.id,
      direction: body.direction,
      decisions: decisions.map((d) => ({
        check: d.check,
        check_index: d.checkIndex,
        action: d.action,
        kinds: d.kinds,
      })),
    };
  },
});

import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import type { Attachment } from "../store.ts";
import { type GuardrailRouteDeps, guardrailRole, TAG } from "./deps.ts";
import { attachmentList, attachmentsBody } from "./schemas.ts";

const answer = (id: string, attachments: Attachment[]) => ({
  object: "guardrail.attachments" as const,
  guardrail_id: id,
  attachments,
});

/** `GET /api/v1/guardrails/{id}/attachments`: where the guardrail applies; needs reader. */
export const getGuardrailAttachments = defineRoute({
  method: "GET",
  path: "/api/v1/guardrails/:id/attachments",
  operationId: "getGuardrailAttachments",
  summary: "Where a guardrail is attached (reader)",
  tag: TAG,
  permission: "guardrails:read",
  responses: ok("Its attachments: organization first, then keys, then models", attachmentList),
  errors: ["not_found"],
  authorize: guardrailRole("reader"),
  handler: async ({ principal, params }, deps: GuardrailRouteDeps) => {
    const found = await deps.guardrails.store.attachments(principal.org, params.id!);
    if (!found) throw notFound(`No guardrail ${params.id}`);
    return answer(params.id!, found);
  },
});

/**
 * `PUT /api/v1/guardrails/{id}/attachments` `{attachments: [...]}` → where
 * it is attached now; needs owner. The list replaces the old one (empty:
 * detached everywhere). Attaching to or detaching from anything but the
 * owner's own keys needs `admin:api-keys` too.
 */
export const putGuardrailAttachments = defineRoute({
  method: "PUT",
  path: "/api/v1/guardrails/:id/attachments",
  operationId: "putGuardrailAttachments",
  summary: "Replace where a guardrail is attached (owner)",
  description:
    "Attaching to or detaching from the organization, a model or another user's key needs `admin:api-keys` as well; a key must be one of the organization's (422).",
  tag: TAG,
  permission: "guardrails:write",
  body: attachmentsBody,
  responses: ok("Its attachments: organization first, then keys, then models", attachmentList),
  errors: ["not_found"],
  authorize: guardrailRole("owner"),
  handler: async ({ principal, params, body, req }, deps: GuardrailRouteDeps) => {
    const set = await deps.guardrails.setAttachments(
      { principal, requestId: String(req.id) },
      params.id!,
      body.attachments,
    );
    if (!set) throw notFound(`No guardrail ${params.id}`);
    return answer(params.id!, set);
  },
});

import type { ResourceAuthorization, Role } from "@gw/core/authz";
import { roleOn } from "../../http/roles.ts";
import type { Guardrails } from "../guardrails.ts";

/** What the guardrail routes need. */
export interface GuardrailRouteDeps {
  guardrails: Guardrails;
  authorization: ResourceAuthorization;
}

export const TAG = "Guardrails";

/** The principal's `role` on the guardrail of the path's `id`. */
export const guardrailRole = (role: Role) => roleOn("guardrail", role);

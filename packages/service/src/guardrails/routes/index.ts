import type { Route } from "@gw/core/http";
import { getGuardrailAttachments, putGuardrailAttachments } from "./attachments.ts";
import type { GuardrailRouteDeps } from "./deps.ts";
import {
  createGuardrail,
  deleteGuardrail,
  evaluateGuardrail,
  getGuardrail,
  listGuardrails,
  updateGuardrail,
} from "./guardrails.ts";

export type { GuardrailRouteDeps };

/** Every `/api/v1/guardrails` route. */
export const guardrailRoutes: Route<GuardrailRouteDeps>[] = [
  createGuardrail,
  listGuardrails,
  getGuardrail,
  updateGuardrail,
  deleteGuardrail,
  evaluateGuardrail,
  getGuardrailAttachments,
  putGuardrailAttachments,
];

import { ACTIONS, APPLIES_TO, checkSchema, checksSchema } from "@gw/core/guardrails";
import { type JsonSchema, jsonSchemaOf, objectSchema } from "@gw/core/openapi";
import { z } from "zod";
import { nullable, unixTime } from "../../http/schemas.ts";
import { type Attachment, attachmentLabel } from "../store.ts";

/** Places one guardrail is attached to, at most. */
export const MAX_ATTACHMENTS = 100;

// A name is quoted in the refusals callers get (`guardrail_blocked`) and in logs: no line breaks or other controls.
const NO_CONTROL = {
  message: "Text must not contain control characters (U+0000 to U+001F, U+007F to U+009F)",
  params: { type: "value_error" },
} as const;
const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((v) => !/\p{Cc}/u.test(v), NO_CONTROL);

export const guardrailName = text(256);
export const appliesTo = z.enum(APPLIES_TO);
export const guardrailAction = z.enum(ACTIONS);

export const createGuardrailBody = z.strictObject({
  name: guardrailName,
  checks: checksSchema,
  applies_to: appliesTo,
  action: guardrailAction,
});

export const updateGuardrailBody = z.strictObject({
  name: guardrailName.optional(),
  checks: checksSchema.optional(),
  applies_to: appliesTo.optional(),
  action: guardrailAction.optional(),
});

const attachment = z.discriminatedUnion("scope", [
  z.strictObject({ scope: z.literal("organization") }),
  z.strictObject({ scope: z.literal("key"), key_id: z.string().regex(/^key_[A-Za-z0-9_-]{1,64}$/) }),
  z.strictObject({ scope: z.literal("model"), model: text(256) }),
]);

/** The whole list of places: each named once (a repeat counts once). */
export const attachmentsBody = z.strictObject({
  attachments: z
    .array(attachment)
    .max(MAX_ATTACHMENTS)
    .transform((list): Attachment[] => {
      const seen = new Set<string>();
      return list.filter((a) => !seen.has(attachmentLabel(a)) && seen.add(attachmentLabel(a)));
    }),
});

// --- answers ---

export const guardrail: JsonSchema = objectSchema({
  id: { type: "string", description: "`gr_` and 32 hex digits" },
  object: { type: "string", const: "guardrail" },
  name: { type: "string" },
  checks: { type: "array", items: jsonSchemaOf(checkSchema, "output") },
  applies_to: { enum: [...APPLIES_TO] },
  action: { enum: [...ACTIONS] },
  created_at: unixTime,
});

export const guardrailList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: guardrail },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

export const attachmentList: JsonSchema = objectSchema({
  object: { type: "string", const: "guardrail.attachments" },
  guardrail_id: { type: "string" },
  attachments: { type: "array", items: jsonSchemaOf(attachment, "output") },
});

/** A text to try against one guardrail's checks: nothing is stored, sent on, audited or counted. */
export const evaluateGuardrailBody = z.strictObject({
  text: z.string().max(100_000),
  direction: z.enum(["input", "output"]).default("input"),
});

export const guardrailEvaluation: JsonSchema = objectSchema({
  object: { type: "string", const: "guardrail.evaluation" },
  guardrail_id: { type: "string" },
  direction: { enum: ["input", "output"] },
  decisions: {
    type: "array",
    items: objectSchema({
      check: { type: "string", description: "The check's `type`" },
      check_index: { type: "integer", description: "Its position in the guardrail's `checks`" },
      action: { enum: [...ACTIONS] },
      kinds: {
        type: "array",
        items: { type: "string" },
        description: "What was found, by type; never the text",
      },
    }),
  },
});

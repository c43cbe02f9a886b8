import { z } from "zod";
import type { Ids } from "../ids.ts";
import { byType, chosen, notSupported } from "../schema.ts";
import { ID_PREFIX, type Item } from "./items.ts";

/**
 * Items as clients send them (`input` of a response, `items` of a
 * conversation), in the shapes the OpenAI SDKs send: plain `{role, content}`
 * messages, the output items of an earlier response sent back, function
 * calls and their outputs, and in a response's input references to stored
 * items. Types this service cannot handle (images, files, built-in tool
 * calls, reasoning…) are a 422 at their `type`.
 */
const ROLES = ["user", "assistant", "system", "developer"] as const;
const STATUS = z.enum(["in_progress", "completed", "incomplete"]).nullish();
const ID = z.string().max(256).nullish();

const textPart = <T extends string>(type: T) => z.strictObject({ type: z.literal(type), text: z.string() });

const contentPart = byType("Content type", {
  input_text: textPart("input_text"),
  output_text: textPart("output_text").extend({
    annotations: z.array(z.unknown()).nullish(),
    logprobs: z.array(z.unknown()).nullish(),
  }),
  text: textPart("text"),
});

/** A string, or a list of text parts. */
const text = z.string();
const contentParts = z.array(contentPart).min(1);
// Each branch is built once: a schema built per request pays zod's compilation on every call.
const content = chosen((v) => (typeof v === "string" ? text : contentParts));
const outputParts = z.array(byType("Output content type", { input_text: textPart("input_text") }));

const message = z.strictObject({
  type: z.literal("message").optional(),
  id: ID,
  status: STATUS,
  role: z.enum(ROLES),
  content,
  phase: z.enum(["commentary", "final_answer"]).nullish(),
});

const callId = z.string().min(1).max(256);

const functionCall = z.strictObject({
  type: z.literal("function_call"),
  id: ID,
  status: STATUS,
  call_id: callId,
  name: z.string().min(1).max(128),
  arguments: z.string(),
  namespace: z.string().nullish(),
  // openai-python's `model_dump()` of a call names `async` `async_`; both are taken when they ask for nothing.
  async: notSupported("Asynchronous function calls", (v) => v === null || v === false),
  async_: notSupported("Asynchronous function calls", (v) => v === null || v === false),
  caller: notSupported(
    "A caller other than direct",
    (v) => v === null || (typeof v === "object" && (v as { type?: unknown }).type === "direct"),
  ),
});

const functionCallOutput = z.strictObject({
  type: z.literal("function_call_output"),
  id: ID,
  status: STATUS,
  call_id: callId,
  output: chosen((v) => (typeof v === "string" ? text : outputParts)),
});

export const inputItem = byType(
  "Item type",
  { message, function_call: functionCall, function_call_output: functionCallOutput },
  "message",
);

export type InputItem = z.output<typeof inputItem>;

/** The caller's answer to a hosted MCP tool's approval request, in a response that names it with `previous_response_id`. */
const mcpApprovalResponse = z.strictObject({
  type: z.literal("mcp_approval_response"),
  id: ID,
  approval_request_id: z
    .string()
    .regex(/^mcpr_[0-9a-f]{32}$/, "String should be an approval request id (mcpr_…)"),
  approve: z.boolean(),
  reason: z.string().max(4096).nullish(),
});

/** A stored item named by its id (OpenAI's `item_reference`), in a response's `input`. */
const itemReference = z.strictObject({ type: z.literal("item_reference"), id: z.string().min(1).max(256) });

export const responseInputItem = byType(
  "Item type",
  {
    message,
    function_call: functionCall,
    function_call_output: functionCallOutput,
    item_reference: itemReference,
    mcp_approval_response: mcpApprovalResponse,
  },
  "message",
);

export type ResponseInputItem = z.output<typeof responseInputItem>;

/**
 * A response's input as stored items with fresh ids: references become a
 * copy of the item `resolve` finds (which decides who may read what).
 */
export async function toTurn(
  input: string | ResponseInputItem[],
  resolve: (id: string, index: number) => Promise<Item>,
  ids: Ids,
): Promise<Item[]> {
  if (typeof input === "string") return toItems(input, ids);
  return Promise.all(
    input.map(async (item, index) => {
      if (item.type === "mcp_approval_response") {
        return {
          type: "mcp_approval_response",
          id: ids.newId(ID_PREFIX.mcp_approval_response),
          approval_request_id: item.approval_request_id,
          approve: item.approve,
          reason: item.reason ?? null,
        };
      }
      if (item.type !== "item_reference") return toItems([item], ids)[0]!;
      const found = await resolve(item.id, index);
      return { ...found, id: ids.newId(ID_PREFIX[found.type]) };
    }),
  );
}

/** What the client sent, as stored items with fresh ids. */
export function toItems(input: string | InputItem[], ids: Ids): Item[] {
  const items: InputItem[] = typeof input === "string" ? [{ role: "user", content: input }] : input;
  return items.map((item): Item => {
    if (item.type === "function_call") {
      const { call_id, name, arguments: args } = item;
      return {
        type: "function_call",
        id: ids.newId(ID_PREFIX.function_call),
        status: "completed",
        call_id,
        name,
        arguments: args,
      };
    }
    if (item.type === "function_call_output") {
      const output =
        typeof item.output === "string"
          ? item.output
          : item.output.map(({ text }) => ({ type: "input_text" as const, text }));
      return {
        type: "function_call_output",
        id: ids.newId(ID_PREFIX.function_call_output),
        status: "completed",
        call_id: item.call_id,
        output,
      };
    }
    const assistant = item.role === "assistant";
    const texts = typeof item.content === "string" ? [item.content] : item.content.map((p) => p.text);
    return {
      type: "message",
      id: ids.newId(ID_PREFIX.message),
      status: "completed",
      role: item.role,
      content: texts.map((text) =>
        assistant
          ? { type: "output_text", text, annotations: [], logprobs: [] }
          : { type: "input_text", text },
      ),
    };
  });
}

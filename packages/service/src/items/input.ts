import { z } from "zod";
import type { Ids } from "../ids.ts";
import { byType, chosen, notSupported } from "../schema.ts";
import { ID_PREFIX, type Item } from "./items.ts";

/**
 * Items as clients send them (`input` of a response, `items` of a
 * conversation), in the shapes the OpenAI SDKs send: plain `{role, content}`
 * messages, the output items of an earlier response sent back (hosted MCP
 * items too), function calls and their outputs, and in a response's input
 * references to stored items. Types this service cannot handle (images,
 * files, other built-in tool calls, reasoning…) are a 422 at their `type`.
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

/*
 * Hosted MCP items of an earlier response, sent back by clients that keep
 * their own history (docs/api/mcp.md#items-sent-back). They are context
 * only: an `mcp_call` is shown to the model as the call and its result, an
 * `mcp_list_tools` and an `mcp_approval_request` as nothing; none runs
 * anything. Shapes as OpenAI's (`MCPListTools`, `MCPToolCall`,
 * `MCPApprovalRequest`).
 */
const itemId = z.string().min(1).max(256);
const serverLabel = z.string().min(1).max(256);
const toolName = z.string().min(1).max(256);

const mcpListTools = z.strictObject({
  type: z.literal("mcp_list_tools"),
  id: itemId,
  server_label: serverLabel,
  tools: z
    .array(
      z.strictObject({
        name: toolName,
        description: z.string().max(8192).nullish(),
        input_schema: z.record(z.string(), z.unknown()),
        annotations: z.record(z.string(), z.unknown()).nullish(),
      }),
    )
    .max(1_000),
  error: z.string().max(8192).nullish(),
});

// OpenAI's newer documents describe a call's error as an object ({type, code?, message}); both are taken.
const errorText = z.string().max(8192);
const errorObject = z.looseObject({ type: z.string().optional(), message: errorText.optional() });
const mcpCallError = chosen((v) => (typeof v === "string" ? errorText : errorObject));

const mcpCall = z.strictObject({
  type: z.literal("mcp_call"),
  id: itemId,
  server_label: serverLabel,
  name: toolName,
  arguments: z.string(),
  output: z.string().nullish(),
  error: mcpCallError.nullish(),
  status: z.enum(["in_progress", "completed", "incomplete", "calling", "failed"]).nullish(),
  approval_request_id: z.string().max(256).nullish(),
});

const mcpApprovalRequest = z.strictObject({
  type: z.literal("mcp_approval_request"),
  id: itemId,
  server_label: serverLabel,
  name: toolName,
  arguments: z.string(),
});

/**
 * The caller's answer to a hosted MCP tool's approval request. In a
 * response's input it answers the request (docs/api/mcp.md#approvals);
 * in a conversation's items it is history.
 */
const mcpApprovalResponse = z.strictObject({
  type: z.literal("mcp_approval_response"),
  id: ID,
  approval_request_id: z
    .string()
    .regex(/^mcpr_[0-9a-f]{32}$/, "String should be an approval request id (mcpr_…)"),
  approve: z.boolean(),
  reason: z.string().max(4096).nullish(),
});

const itemTypes = {
  message,
  function_call: functionCall,
  function_call_output: functionCallOutput,
  mcp_list_tools: mcpListTools,
  mcp_call: mcpCall,
  mcp_approval_request: mcpApprovalRequest,
  mcp_approval_response: mcpApprovalResponse,
};

export const inputItem = byType("Item type", itemTypes, "message");

export type InputItem = z.output<typeof inputItem>;

/** A stored item named by its id (OpenAI's `item_reference`), in a response's `input`. */
const itemReference = z.strictObject({ type: z.literal("item_reference"), id: z.string().min(1).max(256) });

export const responseInputItem = byType(
  "Item type",
  { ...itemTypes, item_reference: itemReference },
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
    if (item.type === "mcp_approval_response") {
      return {
        type: "mcp_approval_response",
        id: ids.newId(ID_PREFIX.mcp_approval_response),
        approval_request_id: item.approval_request_id,
        approve: item.approve,
        reason: item.reason ?? null,
      };
    }
    if (item.type === "mcp_list_tools") {
      return {
        type: "mcp_list_tools",
        id: ids.newId(ID_PREFIX.mcp_list_tools),
        server_label: item.server_label,
        tools: item.tools.map((tool) => ({
          name: tool.name,
          ...(tool.description != null ? { description: tool.description } : {}),
          input_schema: tool.input_schema,
          ...(tool.annotations != null ? { annotations: tool.annotations } : {}),
        })),
        ...(item.error != null ? { error: item.error } : {}),
      };
    }
    if (item.type === "mcp_call") {
      const error =
        item.error == null
          ? null
          : typeof item.error === "string"
            ? item.error
            : (item.error.message ?? JSON.stringify(item.error));
      return {
        type: "mcp_call",
        id: ids.newId(ID_PREFIX.mcp_call),
        status: error !== null || item.status === "failed" ? "failed" : "completed",
        server_label: item.server_label,
        name: item.name,
        arguments: item.arguments,
        output: item.output ?? null,
        error,
        approval_request_id: item.approval_request_id ?? null,
      };
    }
    if (item.type === "mcp_approval_request") {
      return {
        type: "mcp_approval_request",
        id: ids.newId(ID_PREFIX.mcp_approval_request),
        server_label: item.server_label,
        name: item.name,
        arguments: item.arguments,
      };
    }
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

import { type ChatMessage, fromTextParts, type ToolCall } from "../llm/provider.ts";

/**
 * Items as the Responses and Conversations APIs have them: the turns of a
 * conversation, the input of a response and its output. Stored items always
 * carry the service's own ids.
 */
export type Item =
  | MessageItem
  | FunctionCallItem
  | FunctionCallOutputItem
  | McpListToolsItem
  | McpCallItem
  | McpApprovalRequestItem
  | McpApprovalResponseItem
  | FileSearchCallItem;

export type ContentPart =
  | { type: "input_text"; text: string }
  | { type: "output_text"; text: string; annotations?: unknown[]; logprobs?: unknown[] };

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface MessageItem {
  type: "message";
  id: string;
  status: ItemStatus;
  role: "user" | "assistant" | "system" | "developer";
  content: ContentPart[];
}

/** A call of a function tool the model made; the caller runs it and answers with a `function_call_output`. */
export interface FunctionCallItem {
  type: "function_call";
  id: string;
  status: ItemStatus;
  call_id: string;
  name: string;
  arguments: string;
}

export interface FunctionCallOutputItem {
  type: "function_call_output";
  id: string;
  status: ItemStatus;
  call_id: string;
  output: string | { type: "input_text"; text: string }[];
}

/**
 * The tools a hosted MCP server offered the principal (OpenAI's
 * `mcp_list_tools`). As OpenAI sends it: `error` only when the listing
 * failed, a tool's `description` and `annotations` only when it has them
 * (the Vercel AI SDK refuses them as `null`).
 */
export interface McpListToolsItem {
  type: "mcp_list_tools";
  id: string;
  server_label: string;
  tools: McpListedTool[];
  error?: string;
}

export interface McpListedTool {
  name: string;
  description?: string;
  input_schema: unknown;
  annotations?: Record<string, unknown>;
}

/** A hosted MCP tool call the service ran (OpenAI's `mcp_call`). */
export interface McpCallItem {
  type: "mcp_call";
  id: string;
  status: "completed" | "failed";
  server_label: string;
  name: string;
  arguments: string;
  output: string | null;
  error: string | null;
  approval_request_id: string | null;
}

/** A hosted MCP tool call waiting for the caller's approval (OpenAI's `mcp_approval_request`). */
export interface McpApprovalRequestItem {
  type: "mcp_approval_request";
  id: string;
  server_label: string;
  name: string;
  arguments: string;
}

/** The caller's answer to an approval request (OpenAI's `mcp_approval_response`). */
export interface McpApprovalResponseItem {
  type: "mcp_approval_response";
  id: string;
  approval_request_id: string;
  approve: boolean;
  reason: string | null;
}

/** One chunk a `file_search` tool found (OpenAI's `FileSearchToolCall.results[]`). */
export interface FileSearchResult {
  file_id: string;
  filename: string;
  score: number;
  attributes: Record<string, string | number | boolean>;
  text: string;
}

/** A `file_search` tool's search, which the service ran (OpenAI's `file_search_call`). */
export interface FileSearchCallItem {
  type: "file_search_call";
  id: string;
  status: "completed" | "failed";
  queries: string[];
  /** What it found, when the request's `include` names `file_search_call.results`; else `null`. */
  results: FileSearchResult[] | null;
}

/** The prefix of a new item's id, by type (as OpenAI's ids read). */
export const ID_PREFIX: Record<Item["type"], string> = {
  message: "msg",
  function_call: "fc",
  function_call_output: "fco",
  mcp_list_tools: "mcpl",
  mcp_call: "mcp",
  mcp_approval_request: "mcpr",
  mcp_approval_response: "mcpa",
  file_search_call: "fs",
};

const textOf = (parts: { text: string }[] | string) =>
  typeof parts === "string" ? parts : parts.map((p) => p.text).join("");

/** Characters of an item, as context budgets count them. */
export function itemChars(item: Item): number {
  switch (item.type) {
    case "message":
      return textOf(item.content).length;
    case "function_call":
      return item.name.length + item.arguments.length;
    case "function_call_output":
      return textOf(item.output).length;
    case "mcp_call":
      return item.name.length + item.arguments.length + (item.output ?? item.error ?? "").length;
    case "mcp_approval_request":
      return item.name.length + item.arguments.length;
    default:
      return 0;
  }
}

/**
 * The items as chat messages, oldest first. A function call joins the
 * assistant message right before it (one assistant turn with its tool
 * calls); its output becomes a `tool` message. Chat providers refuse a tool
 * call that is never answered and an answer to no call, so calls without an
 * output in `items` and outputs without a call before them are left out.
 */
export function toChatMessages(items: Item[]): ChatMessage[] {
  const answered = new Set(items.flatMap((i) => (i.type === "function_call_output" ? [i.call_id] : [])));
  const called = new Set<string>();
  const messages: ChatMessage[] = [];
  for (const item of items) {
    if (item.type === "message") {
      messages.push({ role: item.role, ...fromTextParts(item.content.map((part) => part.text)) });
    } else if (item.type === "function_call") {
      if (!answered.has(item.call_id)) continue;
      called.add(item.call_id);
      const call: ToolCall = { id: item.call_id, name: item.name, arguments: item.arguments };
      const last = messages.at(-1);
      if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
      else messages.push({ role: "assistant", content: "", toolCalls: [call] });
    } else if (item.type === "mcp_call") {
      // A hosted tool's call and its result, as the model saw them.
      const call: ToolCall = { id: item.id, name: item.name, arguments: item.arguments };
      const last = messages.at(-1);
      if (last?.role === "assistant" && !last.content) last.toolCalls = [...(last.toolCalls ?? []), call];
      else messages.push({ role: "assistant", content: "", toolCalls: [call] });
      messages.push({ role: "tool", toolCallId: item.id, content: item.output ?? `Error: ${item.error}` });
    } else if (item.type === "function_call_output" && called.has(item.call_id)) {
      messages.push({ role: "tool", toolCallId: item.call_id, content: textOf(item.output) });
    }
  }
  return messages;
}

import { secretField } from "@gw/core/validation";
import { z } from "zod";
import { metadataSchema } from "../conversations/metadata.ts";
import { responseInputItem } from "../items/input.ts";
import { modelName } from "../llm/models.ts";
import type { ChatRequest } from "../llm/provider.ts";
import { byType, chosen, float, notSupported } from "../schema.ts";
import { attributeFilter, maxNumResults, rankingOptions } from "../vector-stores/search-request.ts";

/**
 * The body of `POST /api/v1/llm/responses`, as the OpenAI SDKs send it. Every
 * field the OpenAI Responses API defines is either honoured or refused with a
 * 422 naming it; unknown fields are `extra_forbidden`. `null` is taken as
 * absent before this schema sees the body.
 */
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const nameOf = (what: string) => z.string().regex(NAME, `${what} should be 1 to 64 letters, digits, _ or -`);

/** A function tool's definition, as both APIs take it (Responses flat, Chat Completions under `function`). */
export const functionDefinition = {
  name: nameOf("A function name"),
  description: z.string().max(8192).nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
};

/** A JSON schema for the answer, as both APIs take it (Responses in `text.format`, Chat Completions in `response_format.json_schema`). */
export const jsonSchemaFormat = {
  name: nameOf("A schema name"),
  schema: z.record(z.string(), z.unknown()),
  description: z.string().nullish(),
  strict: z.boolean().nullish(),
};

const functionTool = z.strictObject({ type: z.literal("function"), ...functionDefinition });

const toolNames = z.array(z.string().min(1).max(128)).max(128);
const refused = (what: string) =>
  z
    .unknown()
    .refine((v) => v === undefined, {
      message: `${what}: a hosted MCP tool's credentials come from the gateway's vault (PUT /api/v1/mcp/servers/{id}/credentials/{scope})`,
      params: { type: "value_error" },
    })
    .transform(() => undefined)
    .optional();

/**
 * OpenAI's hosted MCP tool (docs/api/mcp.md): `server_url` must be a
 * registered server's proxy URL on this gateway (checked when the turn
 * starts); credentials never come with the request.
 */
export const mcpTool = z.strictObject({
  type: z.literal("mcp"),
  server_label: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, "A server label should be 1 to 32 letters, digits, _ or -"),
  server_url: z.string().min(1).max(2048),
  server_description: z.string().max(1024).optional(),
  allowed_tools: z
    .union([
      toolNames,
      z.strictObject({ tool_names: toolNames.optional(), read_only: z.boolean().optional() }),
    ])
    .optional(),
  require_approval: z
    .union([
      z.enum(["always", "never"]),
      z.strictObject({
        always: z
          .strictObject({ tool_names: toolNames.optional(), read_only: z.boolean().optional() })
          .optional(),
        never: z
          .strictObject({ tool_names: toolNames.optional(), read_only: z.boolean().optional() })
          .optional(),
      }),
    ])
    .optional(),
  // Refused, and never echoed: what a client sends here is a credential.
  headers: secretField(refused("headers")),
  authorization: secretField(refused("authorization")),
  connector_id: notSupported("connector_id (OpenAI's connectors)"),
  allowed_callers: z.array(z.string()).optional(),
  defer_loading: z.boolean().optional(),
});
export type McpToolInput = z.output<typeof mcpTool>;

/** Vector stores one `file_search` tool searches at most. */
export const MAX_FILE_SEARCH_STORES = 10;

/**
 * OpenAI's `file_search` tool (docs/api/vector-store-search.md#the-responses-file_search-tool): the
 * service searches `vector_store_ids` as the principal, with the rules of
 * `POST /vector_stores/{id}/search`, and gives the model what it found.
 */
export const fileSearchTool = z.strictObject({
  type: z.literal("file_search"),
  vector_store_ids: z.array(z.string().min(1).max(256)).min(1).max(MAX_FILE_SEARCH_STORES),
  max_num_results: maxNumResults.optional(),
  filters: attributeFilter.nullish(),
  ranking_options: rankingOptions.optional(),
});
export type FileSearchToolInput = z.output<typeof fileSearchTool>;

const textFormat = byType("Text format", {
  text: z.strictObject({ type: z.literal("text") }),
  json_object: z.strictObject({ type: z.literal("json_object") }),
  json_schema: z.strictObject({ type: z.literal("json_schema"), ...jsonSchemaFormat }),
});

const toolChoiceMode = z.enum(["none", "auto", "required"]);
const toolChoiceType = byType("Tool choice type", {
  function: z.strictObject({ type: z.literal("function"), name: z.string() }),
  // One of a hosted MCP server's tools (`name`), or any of them.
  mcp: z.strictObject({ type: z.literal("mcp"), server_label: z.string(), name: z.string().nullish() }),
  // The search runs before the model is asked, whatever the choice: one is always made.
  file_search: z.strictObject({ type: z.literal("file_search") }),
});
// Each branch is built once: a schema built per request pays zod's compilation on every call.
const toolChoice = chosen((v) => (typeof v === "string" ? toolChoiceMode : toolChoiceType));

/** Reasoning effort as OpenAI names it; sent to chat providers as `reasoning_effort`. */
export const reasoningEffort = z.enum(["none", "minimal", "low", "medium", "high", "xhigh"]);

/**
 * Chat providers take an effort. A summary is asked for (frameworks ask by
 * default) and echoed; chat providers return no reasoning items, so there is
 * never one to summarise.
 */
const summary = z.enum(["auto", "concise", "detailed"]).nullish();
const reasoning = z.strictObject({
  effort: reasoningEffort.nullish(),
  summary,
  generate_summary: summary,
  mode: notSupported("reasoning.mode", (v) => v === null),
  context: notSupported("reasoning.context", (v) => v === null || v === "auto"),
});

/** What `include` may ask for: every value OpenAI defines (see `includes`). */
export const INCLUDABLE = [
  "file_search_call.results",
  "web_search_call.results",
  "web_search_call.action.sources",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "code_interpreter_call.outputs",
  "reasoning.encrypted_content",
  "message.output_text.logprobs",
] as const;

/**
 * The service tiers a call may ask for: those the provider bills at most at
 * the standard prices `LLM_MODELS` gives (flex costs less). `priority` (and
 * `scale`) cost more than any price the catalogue holds, so budgets and
 * usage would charge them too little: they are refused (422), not priced
 * wrong (docs/api/openai-fields.md).
 */
export const SERVICE_TIERS = ["auto", "default", "flex"] as const;

/** Fields passed on to the provider as they are (chat completions takes them under the same names). */
export const forwardedFields = {
  prompt_cache_key: z.string().max(1024).optional(),
  safety_identifier: z.string().max(64).optional(),
  service_tier: z.enum(SERVICE_TIERS).optional(),
};

/** `stream_options`: obfuscation pads each delta event with an `obfuscation` field when asked. */
export const streamOptions = {
  include_obfuscation: z.boolean().nullish(),
};

const inputText = z.string().min(1);
const inputItems = z.array(responseInputItem).min(1).max(1_000);

export const createResponseBody = z
  .strictObject({
    model: modelName,
    input: chosen((v) => (typeof v === "string" ? inputText : inputItems)),
    stream: z.boolean().default(false),
    instructions: z.string().max(262_144).optional(),
    conversation: z
      .union([z.string(), z.strictObject({ id: z.string() })])
      .transform((c) => (typeof c === "string" ? c : c.id))
      .pipe(z.string().regex(/^conv_[A-Za-z0-9]+$/, "String should be a conversation id (conv_…)"))
      .optional(),
    previous_response_id: z.string().min(1).max(256).optional(),
    max_output_tokens: z.int().min(1).max(1_000_000).optional(),
    metadata: metadataSchema.optional(),
    temperature: float(0, 2).optional(),
    top_p: float(0, 1).optional(),
    user: z.string().max(256).optional(),
    store: z.boolean().default(true),
    text: z
      .strictObject({
        format: textFormat.nullish(),
        verbosity: z.enum(["low", "medium", "high"]).nullish(),
      })
      .optional(),
    tools: z
      .array(byType("Tool type", { function: functionTool, mcp: mcpTool, file_search: fileSearchTool }))
      .max(128)
      .refine((tools) => {
        const names = tools.flatMap((t) => (t.type === "function" ? [t.name] : []));
        return new Set(names).size === names.length;
      }, "Function names should be unique")
      .refine((tools) => {
        const labels = tools.flatMap((t) => (t.type === "mcp" ? [t.server_label] : []));
        return new Set(labels).size === labels.length;
      }, "MCP server labels should be unique")
      .refine(
        (tools) => tools.filter((t) => t.type === "file_search").length <= 1,
        "At most one file_search tool",
      )
      .optional(),
    tool_choice: toolChoice.optional(),
    parallel_tool_calls: z.boolean().default(true),
    truncation: z.enum(["auto", "disabled"]).default("auto"),
    reasoning: reasoning.optional(),
    ...forwardedFields,
    stream_options: z.strictObject(streamOptions).optional(),
    // Enforced: function calls past it are dropped from the answer (and from the stream).
    max_tool_calls: z.int().min(0).max(1_000).optional(),
    // Values about tools this service has no items of ask for nothing; logprobs are asked of the provider.
    include: z.array(z.enum(INCLUDABLE)).max(INCLUDABLE.length).optional(),
    top_logprobs: z.int().min(0).max(20).optional(),
    // Runs on the work queue (responses/background); needs `store`, as OpenAI's does.
    background: z.boolean().default(false),
    // Fields of the OpenAI API this service cannot honour.
    prompt: notSupported("prompt (stored prompt templates)"),
    prompt_cache_retention: notSupported("prompt_cache_retention"),
    prompt_cache_options: notSupported("prompt_cache_options"),
    context_management: notSupported("context_management"),
    moderation: notSupported("moderation"),
    access_programs: notSupported("access_programs"),
    image: notSupported("image"),
    // Not a field of Responses, but chat completions' habit: refused by name rather than as an unknown field.
    n: notSupported("n (a response is one answer; chat completions take n)", (v) => v === 1),
  })
  .superRefine((body, ctx) => {
    if (body.conversation && body.previous_response_id) {
      ctx.addIssue({
        code: "custom",
        path: ["previous_response_id"],
        message: "previous_response_id and conversation cannot be used together",
        input: body.previous_response_id,
      });
    }
    const choice = typeof body.tool_choice === "object" ? body.tool_choice : undefined;
    const mode = typeof body.tool_choice === "string" ? body.tool_choice : undefined;
    const names = new Set(functionTools(body.tools).map((t) => t.name));
    const labels = new Set((body.tools ?? []).flatMap((t) => (t.type === "mcp" ? [t.server_label] : [])));
    const searches = (body.tools ?? []).filter((t) => t.type === "file_search").length;
    if (choice?.type === "function" && !names.has(choice.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice", "name"],
        message: "No function tool with this name in tools",
        input: choice.name,
      });
    } else if (choice?.type === "mcp" && !labels.has(choice.server_label)) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice", "server_label"],
        message: "No mcp tool with this server_label in tools",
        input: choice.server_label,
      });
    } else if (choice?.type === "file_search" && searches === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice", "type"],
        message: "No file_search tool in tools",
        input: choice.type,
      });
    } else if (mode === "required" && names.size + labels.size + searches === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice"],
        message: "tool_choice 'required' needs at least one tool",
        input: body.tool_choice,
      });
    } else if (
      (mode === "required" || (choice && choice.type !== "file_search")) &&
      body.max_tool_calls === 0
    ) {
      // A choice that forces a tool call cannot be kept by a request that allows none.
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice"],
        message: "tool_choice forces a tool call, which max_tool_calls: 0 does not allow",
        input: body.tool_choice,
      });
    }
  });

export type CreateResponseInput = z.output<typeof createResponseBody>;

/** The request's own options for the model call (everything but the model and the messages). */
export function chatOptions(input: CreateResponseInput): Omit<ChatRequest, "model" | "messages"> {
  const format = input.text?.format;
  return {
    maxOutputTokens: input.max_output_tokens,
    temperature: input.temperature,
    topP: input.top_p,
    user: input.user,
    verbosity: input.text?.verbosity ?? undefined,
    reasoningEffort: input.reasoning?.effort ?? undefined,
    responseFormat:
      format?.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: {
              name: format.name,
              schema: format.schema,
              ...(format.description != null ? { description: format.description } : {}),
              ...(format.strict != null ? { strict: format.strict } : {}),
            },
          }
        : format?.type === "json_object"
          ? { type: "json_object" }
          : undefined,
    tools: functionTools(input.tools).map((t) => ({
      name: t.name,
      description: t.description ?? undefined,
      parameters: t.parameters ?? undefined,
      strict: t.strict ?? undefined,
    })),
    // No call allowed: the model is not offered any; one allowed: one at a time.
    toolChoice: input.max_tool_calls === 0 && input.tools?.length ? "none" : chatToolChoice(input),
    parallelToolCalls: input.tools?.length
      ? input.parallel_tool_calls && input.max_tool_calls !== 1
      : undefined,
    promptCacheKey: input.prompt_cache_key,
    safetyIdentifier: input.safety_identifier,
    serviceTier: input.service_tier,
    ...(wantsLogprobs(input)
      ? { logprobs: true, topLogprobs: input.top_logprobs, fieldNames: { logprobs: "include" } }
      : {}),
  };
}

/**
 * The tool choice as the model is asked. A hosted server's tool is "required" here: the name of the
 * function it is offered as is known once its tools are listed (`startHostedTurn`).
 */
function chatToolChoice(input: CreateResponseInput): ChatRequest["toolChoice"] {
  const choice = input.tool_choice;
  // A file search is made before the model is asked: a choice that only it satisfies asks nothing of the model.
  const modelTools = (input.tools ?? []).some((t) => t.type !== "file_search");
  if (choice === "required") return modelTools ? choice : undefined;
  if (typeof choice !== "object") return choice;
  if (choice.type === "file_search") return undefined;
  return choice.type === "function" ? { name: choice.name } : "required";
}

/** Logprobs of the output text: asked for with `include` or a `top_logprobs` above 0. */
export const wantsLogprobs = (input: CreateResponseInput) =>
  input.include?.includes("message.output_text.logprobs") === true || (input.top_logprobs ?? 0) > 0;

type RequestTool = NonNullable<z.output<typeof createResponseBody>["tools"]>[number];

/** The request's function tools (hosted MCP tools are the service's to run). */
export function functionTools(tools: RequestTool[] | undefined) {
  return (tools ?? []).flatMap((t) => (t.type === "function" ? [t] : []));
}

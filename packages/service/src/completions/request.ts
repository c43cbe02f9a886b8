import { z } from "zod";
import { metadataSchema } from "../conversations/metadata.ts";
import { modelName } from "../llm/models.ts";
import { type ChatMessage, type ChatRequest, fromTextParts } from "../llm/provider.ts";
import {
  forwardedFields,
  functionDefinition,
  jsonSchemaFormat,
  reasoningEffort,
  streamOptions,
} from "../responses/request.ts";
import { byType, chosen, float, notSupported } from "../schema.ts";

/**
 * The body of `POST /api/v1/llm/chat/completions`, as the OpenAI SDKs and
 * the frameworks built on them send it. Every field of OpenAI's Chat
 * Completions API is honoured (sent on to the provider) or refused with a
 * 422 naming it; unknown fields are `extra_forbidden`. `null` is taken as
 * absent before this schema sees the body.
 */
const textPart = z.strictObject({ type: z.literal("text"), text: z.string() });
/** A string, or text parts (images, audio and files are refused at their `type`). */
const text = z.string();
const textParts = z.array(byType("Content part type", { text: textPart })).min(1);
// Each branch is built once: a schema built per request pays zod's compilation on every call.
const content = chosen((v) => (typeof v === "string" ? text : textParts));
/** An assistant's content: also a refusal part, which the model reads back as its text. */
const assistantParts = z
  .array(
    byType("Content part type", {
      text: textPart,
      refusal: z
        .strictObject({ type: z.literal("refusal"), refusal: z.string() })
        .transform((p) => ({ type: "text" as const, text: p.refusal })),
    }),
  )
  .min(1);
const assistantContent = chosen((v) => (typeof v === "string" ? text : assistantParts));
/** `name`, which OpenAI takes on every role but `tool`, and frameworks (LangChain) send on `tool` too. */
const participant = z.string().max(256).nullish();

const toolCall = z.strictObject({
  id: z.string().min(1).max(256),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1).max(128), arguments: z.string() }),
});

type Content = string | { type: "text"; text: string }[];
/** A message as the caller sends it, once validated. */
export type CompletionMessage =
  | { role: "system" | "developer" | "user"; content: Content; name?: string | null | undefined }
  | {
      role: "assistant";
      content?: Content | null | undefined;
      name?: string | null | undefined;
      refusal?: string | null | undefined;
      tool_calls?: z.output<typeof toolCall>[] | null | undefined;
    }
  | { role: "tool"; content: Content; tool_call_id: string; name?: string | null | undefined };

const plainMessage = (role: "system" | "developer" | "user") =>
  z.strictObject({ role: z.literal(role), content, name: participant }) as z.ZodType<CompletionMessage>;
/** The schema of each role's message, built once. */
const messages: Record<CompletionMessage["role"], z.ZodType<CompletionMessage>> = {
  system: plainMessage("system"),
  developer: plainMessage("developer"),
  user: plainMessage("user"),
  // Every field of OpenAI's assistant message (`model_dump()` of an answer sends them all, null when absent).
  assistant: z.strictObject({
    role: z.literal("assistant"),
    content: assistantContent.nullish(),
    name: participant,
    tool_calls: z.array(toolCall).max(128).nullish(),
    refusal: z.string().max(65_536).nullish(),
    annotations: z.array(z.unknown()).max(1_000).nullish(),
    audio: notSupported("Assistant audio", (a) => a === null),
    function_call: notSupported("function_call (use tool_calls)", (f) => f === null),
  }) as unknown as z.ZodType<CompletionMessage>,
  tool: z.strictObject({
    role: z.literal("tool"),
    content,
    tool_call_id: z.string().min(1).max(256),
    name: participant,
  }) as z.ZodType<CompletionMessage>,
};
const unknownRole = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"], {
    message:
      "Input should be 'system', 'developer', 'user', 'assistant' or 'tool' ('function' is not supported by this service)",
  }),
}) as unknown as z.ZodType<CompletionMessage>;

const message = chosen((v): z.ZodType<CompletionMessage> => {
  const role = typeof v === "object" && v !== null ? (v as { role?: unknown }).role : undefined;
  return typeof role === "string" && Object.hasOwn(messages, role)
    ? messages[role as CompletionMessage["role"]]
    : unknownRole;
});

const functionTool = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject(functionDefinition),
});

const responseFormat = byType("Response format", {
  text: z.strictObject({ type: z.literal("text") }),
  json_object: z.strictObject({ type: z.literal("json_object") }),
  json_schema: z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject(jsonSchemaFormat),
  }),
});

const toolChoiceMode = z.enum(["none", "auto", "required"]);
const toolChoiceType = byType("Tool choice type", {
  function: z.strictObject({
    type: z.literal("function"),
    function: z.strictObject({ name: z.string() }),
  }),
});
const toolChoice = chosen((v) => (typeof v === "string" ? toolChoiceMode : toolChoiceType));
const stopWord = z.string().min(1).max(256);
const stopWords = z.array(stopWord).min(1).max(4);

export const createCompletionBody = z
  .strictObject({
    model: modelName,
    messages: z.array(message).min(1).max(1_000),
    stream: z.boolean().default(false),
    stream_options: z.strictObject({ include_usage: z.boolean().nullish(), ...streamOptions }).optional(),
    // OpenAI's default is not to store; `store: true` keeps the completion as a `completion` resource.
    store: z.boolean().default(false),
    metadata: metadataSchema.optional(),
    max_tokens: z.int().min(1).max(1_000_000).optional(),
    max_completion_tokens: z.int().min(1).max(1_000_000).optional(),
    temperature: float(0, 2).optional(),
    top_p: float(0, 1).optional(),
    user: z.string().max(256).optional(),
    response_format: responseFormat.optional(),
    reasoning_effort: reasoningEffort.optional(),
    verbosity: z.enum(["low", "medium", "high"]).optional(),
    tools: z
      .array(byType("Tool type", { function: functionTool }))
      .max(128)
      .refine(
        (tools) => new Set(tools.map((t) => t.function.name)).size === tools.length,
        "Function names should be unique",
      )
      .optional(),
    tool_choice: toolChoice.optional(),
    parallel_tool_calls: z.boolean().optional(),
    // Several answers of one call: each up to the output cap, reserved and charged for all of them.
    n: z.int().min(1).max(128).optional(),
    logprobs: z.boolean().optional(),
    top_logprobs: z.int().min(0).max(20).optional(),
    modalities: notSupported(
      "Modalities other than text",
      (v) => Array.isArray(v) && v.every((m) => m === "text"),
    ),
    stop: chosen((v) => (typeof v === "string" ? stopWord : stopWords)).optional(),
    seed: z.int().optional(),
    ...forwardedFields,
    frequency_penalty: float(-2, 2).optional(),
    presence_penalty: float(-2, 2).optional(),
    // Token ids (as the model's tokenizer numbers them) to a bias added to their logits.
    logit_bias: z
      .record(z.string().regex(/^\d{1,9}$/, "A token id"), float(-100, 100))
      .refine((bias) => Object.keys(bias).length <= 1_024, "At most 1024 tokens")
      .optional(),
    audio: notSupported("audio"),
    prediction: notSupported("prediction"),
    web_search_options: notSupported("web_search_options"),
    functions: notSupported("functions (use tools)"),
    function_call: notSupported("function_call (use tool_choice)"),
    prompt_cache_retention: notSupported("prompt_cache_retention"),
    prompt_cache_options: notSupported("prompt_cache_options"),
    moderation: notSupported("moderation"),
  })
  .superRefine((body, ctx) => {
    const choice = body.tool_choice;
    const names = new Set((body.tools ?? []).map((t) => t.function.name));
    if (typeof choice === "object" && !names.has(choice.function.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice", "function", "name"],
        message: "No function tool with this name in tools",
        input: choice.function.name,
      });
    }
    if ((body.top_logprobs ?? 0) > 0 && body.logprobs !== true) {
      ctx.addIssue({
        code: "custom",
        path: ["top_logprobs"],
        message: "top_logprobs needs logprobs: true",
        input: body.top_logprobs,
      });
    }
    if (body.max_tokens !== undefined && body.max_completion_tokens !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["max_tokens"],
        message: "max_tokens and max_completion_tokens cannot be used together",
        input: body.max_tokens,
      });
    }
  });

export type CreateCompletionInput = z.output<typeof createCompletionBody>;

/** A message's text, and its parts when the caller gave several (`fromTextParts`). */
const textOf = (c: string | { text: string }[] | null | undefined): Pick<ChatMessage, "content" | "parts"> =>
  c == null ? { content: "" } : typeof c === "string" ? { content: c } : fromTextParts(c.map((p) => p.text));

/** The caller's messages as the provider takes them. */
export function toChatMessages(messages: CompletionMessage[]): ChatMessage[] {
  return messages.map((m): ChatMessage => {
    if (m.role === "tool") return { role: "tool", ...textOf(m.content), toolCallId: m.tool_call_id };
    if (m.role === "assistant") {
      const toolCalls = (m.tool_calls ?? []).map((c) => ({
        id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
      }));
      // A refusal the model made is what it said.
      const text = textOf(m.content);
      const said = text.content ? text : { content: m.refusal ?? "" };
      return { role: "assistant", ...said, ...(toolCalls.length ? { toolCalls } : {}) };
    }
    return { role: m.role, ...textOf(m.content) };
  });
}

/** The model call a request asks for. */
export function chatRequestOf(input: CreateCompletionInput, model: string): ChatRequest {
  const format = input.response_format;
  const choice = input.tool_choice;
  return {
    model,
    messages: toChatMessages(input.messages),
    maxOutputTokens: input.max_completion_tokens ?? input.max_tokens,
    temperature: input.temperature,
    topP: input.top_p,
    user: input.user,
    verbosity: input.verbosity,
    reasoningEffort: input.reasoning_effort,
    responseFormat:
      format?.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: Object.fromEntries(Object.entries(format.json_schema).filter(([, v]) => v != null)),
          }
        : format?.type === "json_object"
          ? { type: "json_object" }
          : undefined,
    tools: input.tools?.map(({ function: f }) => ({
      name: f.name,
      description: f.description ?? undefined,
      parameters: f.parameters ?? undefined,
      strict: f.strict ?? undefined,
    })),
    toolChoice: typeof choice === "object" ? { name: choice.function.name } : choice,
    parallelToolCalls: input.tools?.length ? input.parallel_tool_calls : undefined,
    seed: input.seed,
    stop: typeof input.stop === "string" ? [input.stop] : input.stop,
    promptCacheKey: input.prompt_cache_key,
    safetyIdentifier: input.safety_identifier,
    serviceTier: input.service_tier,
    logprobs: input.logprobs,
    topLogprobs: input.logprobs ? input.top_logprobs : undefined,
    n: input.n,
    presencePenalty: input.presence_penalty,
    frequencyPenalty: input.frequency_penalty,
    logitBias: input.logit_bias,
  };
}

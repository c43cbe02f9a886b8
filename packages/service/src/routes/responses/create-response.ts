import {
  type Logger,
  type Principal,
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  ValidationFailed,
  validate,
} from "@gw/core";
import type { Router } from "express";
import { z } from "zod";
import { type ConversationItem, type ConversationStore, newId } from "../../conversations/store.ts";
import { type ContextBudget, fitHistory, messageOf } from "../../llm/context.ts";
import {
  type ChatMessage,
  type ChatProvider,
  type ChatRequest,
  type Completion,
  usageOf,
} from "../../llm/provider.ts";
import type { ResponseObject, ResponseStore } from "../../responses/store.ts";
import type { UsageStore } from "../../usage/store.ts";
import { requireRole } from "../access.ts";
import { metadataSchema } from "../conversations/metadata.ts";
import { type StreamedTurn, streamTurn } from "./stream-response.ts";

const ROLES = ["user", "assistant", "system", "developer"] as const;

const messageSchema = z.strictObject({
  type: z.literal("message").optional(),
  role: z.enum(ROLES),
  content: z.union([
    z.string(),
    z.array(z.strictObject({ type: z.enum(["input_text", "output_text", "text"]), text: z.string() })).min(1),
  ]),
});

const body = z.strictObject({
  model: z.string().min(1).max(256).default("auto"),
  input: z.union([z.string().min(1), z.array(messageSchema).min(1).max(1_000)]),
  stream: z.boolean().default(false),
  instructions: z.string().max(262_144).optional(),
  conversation: z
    .union([z.string(), z.strictObject({ id: z.string() })])
    .transform((c) => (typeof c === "string" ? c : c.id))
    .pipe(z.string().regex(/^conv_[A-Za-z0-9]+$/, "String should be a conversation id (conv_…)"))
    .optional(),
  max_output_tokens: z.int().min(1).max(1_000_000).optional(),
  metadata: metadataSchema.optional(),
});

type Input = z.output<typeof body>;

export interface CreateResponseDeps {
  logger: Logger;
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  usage: UsageStore;
  context: ContextBudget;
}

const textOf = (content: string | { text: string }[]) =>
  typeof content === "string" ? content : content.map((p) => p.text).join("");

/**
 * `POST /api/v1/llm/responses`: one turn with the model, as JSON or as a
 * stream of Responses events. The principal owns the new `resp_…` id. With a
 * `conversation` (writer needed), its newest earlier items that fit the
 * context budget are sent as context and the turn is appended. Usage is
 * recorded only for completed responses. Provider failures are errors with
 * their catalogue code: the error middleware answers them.
 */
export function registerCreateResponse(router: Router, deps: CreateResponseDeps): void {
  router.post("/llm/responses", requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", body, req.body);
    const principal = principalOf(res);
    deps.provider.assertConfigured();
    const model = deps.provider.resolveModel(input.model);
    if (!model) {
      throw new ValidationFailed([
        {
          loc: ["body", "model"],
          msg: `Input should be 'auto' or one of the allowed models`,
          type: "enum",
          input: input.model,
          ctx: { expected: ["auto", ...(deps.provider.allowedModels ?? [])].join(", ") },
        },
      ]);
    }
    const turn = turnItems(input);
    const instructions: ChatMessage[] = input.instructions
      ? [{ role: "system", content: input.instructions }]
      : [];
    const current = turn.map(messageOf);
    const history = input.conversation
      ? await conversationContext(deps, principal, input.conversation, [...instructions, ...current])
      : [];
    const request: ChatRequest = {
      model,
      messages: [...instructions, ...history, ...current],
      maxOutputTokens: input.max_output_tokens,
    };
    const response = draft(input, model);
    // The caller going away stops the model's work.
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("client disconnected"));
    });

    await deps.authorization.createOwnership(principal, { type: "response", id: response.id });
    if (!input.stream) {
      let completion: Completion;
      try {
        completion = await deps.provider.complete(request, abort.signal);
      } catch (err) {
        await release(deps, principal, response.id);
        throw err;
      }
      complete(response, completion);
      await finish(deps, principal, response, input, turn);
      res.json(response);
      return;
    }

    let stream: StreamedTurn;
    try {
      stream = await streamTurn(res, { ...deps, response, request, signal: abort.signal });
    } catch (err) {
      await release(deps, principal, response.id); // failed before the first byte: an ordinary error answer
      throw err;
    }
    if (stream.completion) {
      complete(response, stream.completion);
      try {
        await finish(deps, principal, response, input, turn); // stored before the client hears "completed"
      } catch (err) {
        stream.fail(err);
        await release(deps, principal, response.id);
        return;
      }
      stream.end(response);
      return;
    }
    // The stream broke after it began: what the model produced still counts, nothing else was created.
    if (stream.partial) {
      await deps.usage.record({
        org: principal.org,
        keyId: principal.keyId,
        user: principal.user,
        model,
        usage: usageOf(undefined, request.messages, stream.partial),
      });
    }
    await release(deps, principal, response.id);
  });
}

/** Gives up the id of a response that was never completed (best effort). */
function release(deps: CreateResponseDeps, principal: Principal, id: string): Promise<void> {
  return deps.authorization.deleteResource(principal, { type: "response", id }).then(
    () => undefined,
    () => undefined,
  );
}

/** The conversation's newest items that fit the context budget beside what is `sent` anyway. */
async function conversationContext(
  deps: CreateResponseDeps,
  principal: Principal,
  id: string,
  sent: ChatMessage[],
): Promise<ChatMessage[]> {
  await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
  const pageSize = Math.min(deps.context.maxItems, 100);
  return fitHistory(deps.conversations.newestFirst(principal.org, id, pageSize), sent, deps.context);
}

/** The caller's side of the turn, as conversation items. */
function turnItems(input: Input): ConversationItem[] {
  const messages =
    typeof input.input === "string" ? [{ role: "user" as const, content: input.input }] : input.input;
  return messages.map((m) => ({
    type: "message",
    id: newId("msg"),
    status: "completed",
    role: m.role,
    content: [{ type: m.role === "assistant" ? "output_text" : "input_text", text: textOf(m.content) }],
  }));
}

function draft(input: Input, model: string): ResponseObject {
  return {
    id: newId("resp"),
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "in_progress",
    model,
    output: [],
    usage: null,
    instructions: input.instructions ?? null,
    max_output_tokens: input.max_output_tokens ?? null,
    conversation: input.conversation ? { id: input.conversation } : null,
    metadata: input.metadata ?? {},
  };
}

function complete(response: ResponseObject, completion: Completion): void {
  response.status = "completed";
  response.model = completion.model;
  response.output = [
    {
      type: "message",
      id: response.output[0]?.id ?? newId("msg"),
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: completion.text, annotations: [] }],
    },
  ];
  response.usage = completion.usage;
}

/** Stores the response, appends the turn to its conversation and records usage. */
async function finish(
  deps: CreateResponseDeps,
  principal: Principal,
  response: ResponseObject,
  input: Input,
  turn: ConversationItem[],
): Promise<void> {
  const output = response.output[0]!;
  await Promise.all([
    deps.responses.save(principal.org, response),
    input.conversation
      ? deps.conversations.append(principal.org, input.conversation, [
          ...turn,
          {
            type: "message",
            id: output.id,
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: output.content[0]!.text }],
          },
        ])
      : undefined,
    deps.usage.record({
      org: principal.org,
      keyId: principal.keyId,
      user: principal.user,
      model: response.model,
      usage: response.usage!,
    }),
  ]);
}

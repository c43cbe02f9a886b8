import {
  type Principal,
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  ValidationFailed,
  validate,
} from "@gw/core";
import type { Response, Router } from "express";
import { z } from "zod";
import { type ConversationItem, type ConversationStore, newId } from "../../conversations/store.ts";
import { type ChatMessage, type ChatProvider, type Completion, usageOf } from "../../llm/provider.ts";
import type { ResponseObject, ResponseStore } from "../../responses/store.ts";
import type { UsageStore } from "../../usage/store.ts";
import { requireRole } from "../access.ts";
import { metadataSchema } from "../conversations/metadata.ts";
import { providerErrorToHttp } from "./provider-errors.ts";

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
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  usage: UsageStore;
}

const textOf = (content: string | { text: string }[]) =>
  typeof content === "string" ? content : content.map((p) => p.text).join("");

/**
 * `POST /api/v1/llm/responses`: one turn with the model, as JSON or as a
 * stream of Responses events. The principal owns the new `resp_…` id. With a
 * `conversation` (writer needed), its earlier items are sent as context and
 * the turn is appended. Usage is recorded only for completed responses.
 */
export function registerCreateResponse(router: Router, deps: CreateResponseDeps): void {
  router.post("/llm/responses", requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", body, req.body);
    const principal = principalOf(res);
    try {
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
      const history = input.conversation
        ? await conversationContext(deps, principal, input.conversation)
        : [];
      const turn = turnItems(input);
      const messages: ChatMessage[] = [
        ...(input.instructions ? [{ role: "system" as const, content: input.instructions }] : []),
        ...history,
        ...turn.map((item) => ({ role: item.role, content: item.content.map((c) => c.text).join("") })),
      ];
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
          completion = await deps.provider.complete(model, messages, input.max_output_tokens, abort.signal);
        } catch (err) {
          await release(deps, principal, response.id);
          throw err;
        }
        complete(response, completion);
        await finish(deps, principal, response, input, turn);
        res.json(response);
        return;
      }

      let stream: Awaited<ReturnType<typeof streamTurn>>;
      try {
        stream = await streamTurn(deps, res, response, model, messages, input, abort.signal);
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
          throw err;
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
          usage: usageOf(undefined, messages, stream.partial),
        });
      }
      await release(deps, principal, response.id);
    } catch (err) {
      throw providerErrorToHttp(err);
    }
  });
}

/** Gives up the id of a response that was never completed (best effort). */
function release(deps: CreateResponseDeps, principal: Principal, id: string): Promise<void> {
  return deps.authorization.deleteResource(principal, { type: "response", id }).then(
    () => undefined,
    () => undefined,
  );
}

async function conversationContext(
  deps: CreateResponseDeps,
  principal: Principal,
  id: string,
): Promise<ChatMessage[]> {
  await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
  return (await deps.conversations.items(principal.org, id)).map((item) => ({
    role: item.role,
    content: item.content.map((c) => c.text).join(""),
  }));
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

/**
 * Streams the Responses events: `response.created`, `response.output_text.delta`…,
 * `response.output_text.done`; the caller sends `response.completed` once the
 * response is stored (`end`). Failures before the first byte throw (ordinary
 * error answers); after it, an `error` event ends the stream and what was
 * produced so far is returned as `partial`.
 */
async function streamTurn(
  deps: CreateResponseDeps,
  res: Response,
  response: ResponseObject,
  model: string,
  messages: ChatMessage[],
  input: Input,
  signal: AbortSignal,
): Promise<{
  completion?: Completion;
  partial?: string;
  end(final: ResponseObject): void;
  fail(err: unknown): void;
}> {
  const deltas = deps.provider.stream(model, messages, input.max_output_tokens, signal);
  const first = await deltas.next(); // provider errors surface here, before any byte is sent
  let sequence = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`);
  const fail = (err: unknown) => {
    if (signal.aborted || res.writableEnded) return;
    const http = providerErrorToHttp(err) as { code?: string; message?: string };
    send("error", { code: http.code ?? "internal", message: http.message ?? "The response failed" });
    res.end();
  };
  const end = (final: ResponseObject) => {
    send("response.completed", { response: final });
    res.end();
  };
  res
    .status(200)
    .set({ "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  res.flushHeaders();
  const itemId = newId("msg");
  response.output = [
    {
      type: "message",
      id: itemId,
      status: "in_progress",
      role: "assistant",
      content: [{ type: "output_text", text: "", annotations: [] }],
    },
  ];
  send("response.created", { response: { ...response, output: [] } });
  const part = { item_id: itemId, output_index: 0, content_index: 0 };
  let produced = "";
  try {
    let step = first;
    while (!step.done) {
      produced += step.value;
      send("response.output_text.delta", { ...part, delta: step.value });
      step = await deltas.next();
    }
    send("response.output_text.done", { ...part, text: step.value.text });
    return { completion: step.value, end, fail };
  } catch (err) {
    fail(err);
    return { partial: produced, end, fail };
  }
}

import {
  type ApiOperation,
  deletedSchema,
  type JsonSchema,
  objectSchema,
  stringSchema,
} from "@gw/core/openapi";
import { createCompletionBody } from "../completions/request.ts";
import { createResponseBody } from "../responses/request.ts";
import { USAGE_DIMENSIONS } from "../usage/store.ts";
import { completionMessagesQuery } from "./chat/list-completion-messages.ts";
import { listCompletionsQuery } from "./chat/list-completions.ts";
import { updateCompletionBody } from "./chat/update-completion.ts";
import { addItemsBody, addItemsQuery } from "./conversations/add-items.ts";
import { createConversationBody } from "./conversations/create-conversation.ts";
import { updateConversationBody } from "./conversations/update-conversation.ts";
import { createScheduleBodyOf } from "./evals/create-schedule.ts";
import { pageQuery as evalPageQuery, scheduleIdParams } from "./evals/params.ts";
import { pageQuery } from "./pagination.ts";
import { getResponseQuery } from "./responses/get-response.ts";
import { createSessionBody } from "./sandbox/create-session.ts";
import { pushRequest } from "./sandbox/push.ts";
import { putConnectionBody } from "./sandbox/put-connection.ts";
import { usageQuery } from "./usage/get-usage.ts";

/**
 * What the service serves (through the gateway), for the OpenAPI document
 * (`pnpm openapi`). Request schemas are the routes' own zod schemas; a route
 * added to `app.ts` without a line here fails the route-coverage test.
 */

const API = "/api/v1";
const CONVERSATIONS = "Conversations";
const RESPONSES = "Responses";
const EVALS = "Evals";
const CHAT = "Chat Completions";
const MODELS = "Models";
const SANDBOX = "Sessions";

/**
 * Branch names are checked by `git check-ref-format` when a request comes;
 * the document needs only the schemas' shape, which does not depend on git.
 */
const anyBranchName = { isValidBranchName: async () => true };

const unixTime: JsonSchema = { type: "integer", description: "Unix time, in seconds" };
const metadata: JsonSchema = { type: "object", additionalProperties: { type: "string" } };
const nullable = (type: string): JsonSchema => ({ type: [type, "null"] });

const conversation = objectSchema({
  id: stringSchema("`conv_…`"),
  object: { type: "string", const: "conversation" },
  created_at: unixTime,
  metadata,
});

const item: JsonSchema = {
  type: "object",
  description: "A message, function call or function call output, as OpenAI's Conversations API shows them",
  properties: { id: stringSchema(), type: { enum: ["message", "function_call", "function_call_output"] } },
  required: ["id", "type"],
};

/** OpenAI's list object. */
const itemList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: item },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

const response = objectSchema(
  {
    id: stringSchema("`resp_…`"),
    object: { type: "string", const: "response" },
    created_at: unixTime,
    status: { enum: ["completed", "incomplete", "failed", "in_progress", "cancelled", "queued"] },
    model: stringSchema(),
    output: {
      type: "array",
      items: {
        type: "object",
        description:
          "An output item: a `message` (role `assistant`, `content` of `output_text` parts) or a `function_call`",
        properties: { type: stringSchema() },
        required: ["type"],
      },
    },
    usage: {
      type: ["object", "null"],
      properties: {
        input_tokens: { type: "integer" },
        output_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
      },
    },
  },
  { open: true, optional: ["usage"], description: "OpenAI's response object; further fields as OpenAI's" },
);

const evalList = (items: JsonSchema) =>
  objectSchema({
    object: { type: "string", const: "list" },
    data: { type: "array", items },
    has_more: { type: "boolean" },
  });

const schedule = objectSchema(
  {
    id: stringSchema("`eval_sched_…`"),
    object: { type: "string", const: "eval.schedule" },
    name: stringSchema(),
    model: stringSchema(),
    inputs: { type: "array", items: {} },
    every_seconds: { type: "integer" },
    cron: stringSchema(),
    timezone: stringSchema(),
    created_at: unixTime,
    next_run_at: { type: ["integer", "null"], description: "Unix time, in seconds" },
    metadata,
  },
  { optional: ["every_seconds", "cron", "timezone"] },
);

const run = objectSchema(
  {
    id: stringSchema(),
    object: { type: "string", const: "eval.run" },
    schedule_id: stringSchema(),
    status: stringSchema(),
    model: stringSchema(),
    created_at: unixTime,
    started_at: nullable("integer"),
    completed_at: nullable("integer"),
    error: {},
    results: { type: "array", items: { type: "object" } },
    usage: { type: "object" },
  },
  { open: true },
);

const session = objectSchema({
  id: stringSchema(),
  object: { type: "string", const: "sandbox.session" },
  owner: stringSchema(),
  repository: stringSchema(),
  repository_id: { type: "integer" },
  assignment_generation: { type: "integer" },
  created_at: unixTime,
});

/** `GitHubPushResult`: every field required. */
const pushResult = objectSchema({
  session_id: stringSchema(),
  assignment_generation: { type: "integer" },
  repository_id: { type: "integer" },
  owner: stringSchema(),
  repository: stringSchema(),
  branch: stringSchema(),
  remote_head_sha: stringSchema(),
  no_changes: { type: "boolean" },
});

const totals = objectSchema({
  requests: { type: "integer" },
  input_tokens: { type: "integer" },
  output_tokens: { type: "integer" },
  total_tokens: { type: "integer" },
});

const model = objectSchema({
  id: stringSchema(),
  object: { type: "string", const: "model" },
  created: { type: "integer" },
  owned_by: stringSchema(),
});

const completion = objectSchema(
  {
    id: stringSchema("`chatcmpl-…`"),
    object: { type: "string", const: "chat.completion" },
    created: unixTime,
    model: stringSchema(),
    choices: { type: "array", items: { type: "object" } },
    usage: objectSchema(
      {
        prompt_tokens: { type: "integer" },
        completion_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
      },
      { open: true },
    ),
  },
  { open: true, description: "OpenAI's chat completion object; a stored one also carries `metadata`" },
);

const completionList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: completion },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

const messageList = objectSchema({
  object: { type: "string", const: "list" },
  data: { type: "array", items: { type: "object", description: "`{id, role, content, …}`" } },
  first_id: nullable("string"),
  last_id: nullable("string"),
  has_more: { type: "boolean" },
});

/** Chat Completions are deprecated (API reference §9.3): every answer carries a `Deprecation` header. */
const DEPRECATED = { deprecated: true } as const;

const noContent = { 204: { description: "Done; no body" } };
const ok = (description: string, schema: JsonSchema) => ({ 200: { description, schema } });

export const SERVICE_OPERATIONS: ApiOperation[] = [
  {
    method: "POST",
    path: `${API}/llm/conversations`,
    operationId: "createConversation",
    summary: "Create a conversation; the principal becomes its owner",
    tag: CONVERSATIONS,
    permission: "conversations:write",
    body: createConversationBody,
    responses: ok("The conversation", conversation),
  },
  {
    method: "GET",
    path: `${API}/llm/conversations/:id`,
    operationId: "getConversation",
    summary: "A conversation (reader)",
    tag: CONVERSATIONS,
    permission: "conversations:read",
    responses: ok("The conversation", conversation),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/conversations/:id`,
    operationId: "updateConversation",
    summary: "Replace a conversation's metadata (writer); `null` clears it",
    tag: CONVERSATIONS,
    permission: "conversations:write",
    body: updateConversationBody,
    responses: ok("The conversation", conversation),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/llm/conversations/:id`,
    operationId: "deleteConversation",
    summary: "Delete a conversation, its items and its relationships (owner)",
    tag: CONVERSATIONS,
    permission: "conversations:write",
    responses: ok("Deleted", deletedSchema("conversation.deleted")),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/conversations/:id/items`,
    operationId: "listConversationItems",
    summary: "A page of a conversation's items (reader)",
    tag: CONVERSATIONS,
    permission: "conversations:read",
    query: pageQuery,
    responses: ok("A page of items", itemList),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/conversations/:id/items`,
    operationId: "addConversationItems",
    summary: "Append up to 20 items to a conversation (writer)",
    tag: CONVERSATIONS,
    permission: "conversations:write",
    query: addItemsQuery,
    body: addItemsBody,
    responses: ok("The added items, with their ids", itemList),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/conversations/:id/items/:itemId`,
    operationId: "getConversationItem",
    summary: "One item of a conversation (reader)",
    tag: CONVERSATIONS,
    permission: "conversations:read",
    responses: ok("The item", item),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/llm/conversations/:id/items/:itemId`,
    operationId: "deleteConversationItem",
    summary: "Delete one item of a conversation (writer); answers the conversation",
    tag: CONVERSATIONS,
    permission: "conversations:write",
    responses: ok("The conversation", conversation),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/responses`,
    operationId: "createResponse",
    summary: "One turn with the model, as JSON or (`stream: true`) as server-sent events",
    description:
      "The principal owns the new `resp_…` (unless `store` is false). Earlier context comes from `conversation` (writer) or `previous_response_id` (reader).",
    tag: RESPONSES,
    permission: "responses:write",
    body: createResponseBody,
    responses: {
      200: {
        description: "The response object, or its events when streaming",
        schema: response,
        alternatives: { "text/event-stream": stringSchema("Responses API events") },
      },
    },
    errors: ["bad_request", "not_found", "provider_rate_limited", "bad_gateway", "gateway_timeout"],
  },
  {
    method: "POST",
    path: `${API}/llm/responses/input_tokens`,
    operationId: "countResponseInputTokens",
    summary: "Count the tokens a response with this body would send to the model; nothing is created",
    tag: RESPONSES,
    permission: "responses:read",
    body: createResponseBody,
    responses: ok(
      "The count",
      objectSchema({
        object: { type: "string", const: "response.input_tokens" },
        input_tokens: { type: "integer" },
      }),
    ),
    errors: ["bad_request", "not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/chat/completions`,
    operationId: "createChatCompletion",
    summary: "One call of the model in OpenAI's Chat Completions shape (deprecated: use responses)",
    description:
      "With `store: true` the principal owns the new `chatcmpl-…` id as a `completion` resource and the completion is kept with its messages.",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:write",
    body: createCompletionBody,
    responses: {
      200: {
        description: "The chat completion, or its chunks when streaming",
        schema: completion,
        alternatives: { "text/event-stream": stringSchema("chat.completion.chunk events, then [DONE]") },
      },
    },
    errors: ["bad_request", "not_found", "provider_rate_limited", "bad_gateway", "gateway_timeout"],
  },
  {
    method: "GET",
    path: `${API}/llm/chat/completions`,
    operationId: "listChatCompletions",
    summary: "The stored completions the principal may read",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:read",
    query: listCompletionsQuery,
    responses: ok("A page of completions", completionList),
  },
  {
    method: "GET",
    path: `${API}/llm/chat/completions/:id`,
    operationId: "getChatCompletion",
    summary: "A stored completion (reader)",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:read",
    responses: ok("The completion", completion),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/chat/completions/:id/messages`,
    operationId: "listChatCompletionMessages",
    summary: "The messages a stored completion was asked with (reader)",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:read",
    query: completionMessagesQuery,
    responses: ok("A page of messages", messageList),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/chat/completions/:id`,
    operationId: "updateChatCompletion",
    summary: "Replace a stored completion's metadata (writer); `null` clears it",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:write",
    body: updateCompletionBody,
    responses: ok("The completion", completion),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/llm/chat/completions/:id`,
    operationId: "deleteChatCompletion",
    summary: "Delete a stored completion and its relationships (writer)",
    tag: CHAT,
    ...DEPRECATED,
    permission: "responses:write",
    responses: ok("Deleted", deletedSchema("chat.completion.deleted")),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/models`,
    operationId: "listModels",
    summary: "The models this key may use, as OpenAI lists them",
    tag: MODELS,
    permission: "responses:read or responses:write",
    responses: ok(
      "The list",
      objectSchema({ object: { type: "string", const: "list" }, data: { type: "array", items: model } }),
    ),
  },
  {
    method: "GET",
    path: `${API}/llm/models/:id`,
    operationId: "getModel",
    summary: "One model this key may use",
    tag: MODELS,
    permission: "responses:read or responses:write",
    responses: ok("The model", model),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/responses/:id`,
    operationId: "getResponse",
    summary: "A stored response (reader)",
    tag: RESPONSES,
    permission: "responses:read",
    query: getResponseQuery,
    responses: ok("The response object", response),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/llm/responses/:id`,
    operationId: "deleteResponse",
    summary: "Delete a stored response and its relationships (writer)",
    tag: RESPONSES,
    permission: "responses:write",
    responses: ok("Deleted", deletedSchema("response")),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/responses/:id/input_items`,
    operationId: "listResponseInputItems",
    summary: "The items a response was asked with (reader)",
    tag: RESPONSES,
    permission: "responses:read",
    query: pageQuery,
    responses: ok("A page of items", itemList),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/llm/responses/:id/cancel`,
    operationId: "cancelResponse",
    summary: "Cancel a background response: this service runs none, so a writer gets 400",
    tag: RESPONSES,
    permission: "responses:write",
    responses: {},
    errors: ["bad_request", "not_found"],
  },
  {
    method: "GET",
    path: `${API}/usage`,
    operationId: "getUsage",
    summary: "The organization's requests and tokens over UTC days, optionally grouped",
    tag: "Usage",
    permission: "usage:read",
    query: usageQuery,
    responses: ok(
      "Totals, and one row per group",
      objectSchema({
        object: { type: "string", const: "usage" },
        start: { type: "string", format: "date" },
        end: { type: "string", format: "date" },
        group_by: { enum: [...USAGE_DIMENSIONS, null] },
        totals,
        data: { type: "array", items: { type: "object" } },
      }),
    ),
  },
  {
    method: "POST",
    path: `${API}/llm/evals/schedules`,
    operationId: "createEvalSchedule",
    summary: "Create an eval schedule: `every_seconds` or a `cron` expression",
    tag: EVALS,
    permission: "evals:write",
    // As at the default EVAL_MIN_INTERVAL_SECONDS; a deployment may set another smallest period.
    body: createScheduleBodyOf(60),
    responses: ok("The schedule", schedule),
    errors: ["conflict"],
  },
  {
    method: "GET",
    path: `${API}/llm/evals/schedules`,
    operationId: "listEvalSchedules",
    summary: "The organization's live schedules, newest first",
    tag: EVALS,
    permission: "evals:read",
    query: evalPageQuery,
    responses: ok("A page of schedules", evalList(schedule)),
  },
  {
    method: "GET",
    path: `${API}/llm/evals/schedules/:schedule_id`,
    operationId: "getEvalSchedule",
    summary: "A live schedule",
    tag: EVALS,
    permission: "evals:read",
    params: scheduleIdParams,
    responses: ok("The schedule", schedule),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/llm/evals/schedules/:schedule_id`,
    operationId: "deleteEvalSchedule",
    summary: "Soft-delete a schedule; its runs stay readable",
    tag: EVALS,
    permission: "evals:write",
    params: scheduleIdParams,
    responses: ok("Deleted", deletedSchema("eval.schedule.deleted")),
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/llm/evals/schedules/:schedule_id/runs`,
    operationId: "listEvalRuns",
    summary: "A schedule's runs, newest first; still answered after it is deleted",
    tag: EVALS,
    permission: "evals:read",
    params: scheduleIdParams,
    query: evalPageQuery,
    responses: ok("A page of runs", evalList(run)),
    errors: ["not_found"],
  },
  {
    method: "PUT",
    path: `${API}/sandbox/connections/github`,
    operationId: "putGitHubConnection",
    summary: "Store (replace) the principal's GitHub credential, encrypted",
    tag: SANDBOX,
    permission: "sandbox:write",
    body: putConnectionBody,
    responses: noContent,
  },
  {
    method: "GET",
    path: `${API}/sandbox/connections/github`,
    operationId: "getGitHubConnection",
    summary: "Whether the principal has a stored credential; never the token",
    tag: SANDBOX,
    permission: "sandbox:read",
    responses: ok(
      "The connection's status",
      objectSchema({ connected: { type: "boolean" }, updated_at: { type: ["integer", "null"] } }),
    ),
  },
  {
    method: "DELETE",
    path: `${API}/sandbox/connections/github`,
    operationId: "deleteGitHubConnection",
    summary: "Forget the principal's credential, whether or not one was stored",
    tag: SANDBOX,
    permission: "sandbox:write",
    responses: noContent,
  },
  {
    method: "POST",
    path: `${API}/sandbox/sessions`,
    operationId: "createSandboxSession",
    summary: "Clone a repository into a new session's workspace with the stored credential",
    tag: SANDBOX,
    permission: "sandbox:write",
    body: createSessionBody(anyBranchName),
    responses: ok("The session", session),
    errors: ["conflict", "bad_gateway"],
  },
  {
    method: "GET",
    path: `${API}/sandbox/sessions/:id`,
    operationId: "getSandboxSession",
    summary: "A session of the principal's",
    tag: SANDBOX,
    permission: "sandbox:read",
    responses: ok("The session", session),
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/sandbox/sessions/:id`,
    operationId: "deleteSandboxSession",
    summary: "Delete a session and its workspace",
    tag: SANDBOX,
    permission: "sandbox:write",
    responses: ok("Deleted", deletedSchema("sandbox.session.deleted")),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/sandbox/sessions/:id/assignments`,
    operationId: "startSandboxAssignment",
    summary: "Start a new assignment: pushes of earlier generations are refused from then on",
    tag: SANDBOX,
    permission: "sandbox:write",
    responses: ok("The session with its `assignment_generation` incremented", session),
    errors: ["not_found"],
  },
  {
    method: "POST",
    path: `${API}/sandbox/sessions/:session_id/github/push`,
    operationId: "pushSandboxSession",
    summary: "Push a session's checkout to its repository",
    description:
      "404 for a session that is not the caller's; 409 for a stale generation, a missing connection or a refused update; 502 when the remote cannot be reached.",
    tag: SANDBOX,
    permission: "sandbox:write",
    body: pushRequest(anyBranchName, undefined),
    bodyName: "GitHubPushRequest",
    responses: { 200: { description: "The push's outcome", schema: pushResult, name: "GitHubPushResult" } },
    errors: ["not_found", "conflict", "bad_gateway"],
  },
];

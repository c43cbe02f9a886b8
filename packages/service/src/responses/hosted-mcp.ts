import { AppError, forbidden, ValidationFailed } from "@gw/core/errors";
import { mcpProxyUrl, serverOfProxyUrl, urlWithoutCredentials } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import type { Caller } from "../budgets/admit-model-call.ts";
import { admitCall, releaseOwnership, type StreamedCall } from "../calls/model-call.ts";
import type { Ids } from "../ids.ts";
import {
  ID_PREFIX,
  type Item,
  type McpApprovalResponseItem,
  type McpCallItem,
  type McpListToolsItem,
} from "../items/items.ts";
import type { ChatMessage, ChatRequest, Completion, FunctionTool, ToolCall } from "../llm/provider.ts";
import type { ApprovalRequest, NewApproval } from "./approvals.ts";
import { type HostedMcpConfig, proxyCallTool, proxyListTools } from "./hosted-mcp-proxy.ts";
import { HostedEvents } from "./hosted-stream.ts";
import { prepareTurn } from "./prepare-turn.ts";
import type { CreateResponseInput, McpToolInput } from "./request.ts";
import { draftResponse, outputOf, settle } from "./response.ts";
import { keep, type ResponseTurn, type ResponseTurnDeps } from "./response-turn.ts";
import type { OutputItem, ResponseObject } from "./store.ts";

/** Model rounds of one turn: tool calls, their results, and the answer. */
const MAX_ROUNDS = 5;

interface HostedTool {
  label: string;
  serverId: string;
  spec: McpToolInput;
  tool: string;
  readOnly: boolean;
}

/** The model's name for a hosted tool: `<label>__<tool>` in the function-name alphabet, unique in the turn. */
function functionName(label: string, tool: string, taken: Set<string>): string {
  const base = `${label}__${tool}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60);
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base.slice(0, 58)}_${i}`;
  taken.add(name);
  return name;
}

function allowed(spec: McpToolInput, tool: string, readOnly: boolean): boolean {
  const filter = spec.allowed_tools;
  if (filter === undefined) return true;
  if (Array.isArray(filter)) return filter.includes(tool);
  if (filter.tool_names && !filter.tool_names.includes(tool)) return false;
  return !filter.read_only || readOnly;
}

/** OpenAI's `require_approval`: unset means always. */
function needsApproval(tool: HostedTool): boolean {
  const rule = tool.spec.require_approval;
  if (rule === undefined || rule === "always") return true;
  if (rule === "never") return false;
  const matches = (m?: { tool_names?: string[] | undefined; read_only?: boolean | undefined }) =>
    !!m && (m.tool_names?.includes(tool.tool) === true || (m.read_only === true && tool.readOnly));
  if (matches(rule.never)) return false;
  return true;
}

/**
 * What the turn's first round offers the model and asks of it. `tool_choice` naming a hosted server
 * (`{"type": "mcp", "server_label", "name"}`): that tool's function, or with no `name` any of that
 * server's tools, offered alone; a tool the caller may not call (not listed) is a 400.
 */
function firstRound(
  choice: CreateResponseInput["tool_choice"],
  request: ChatRequest,
  tools: FunctionTool[],
  hosted: Map<string, HostedTool>,
): Pick<ChatRequest, "tools" | "toolChoice"> {
  if (typeof choice !== "object" || choice.type !== "mcp") return { tools, toolChoice: request.toolChoice };
  const ofServer = tools.filter((t) => hosted.get(t.name)?.label === choice.server_label);
  if (choice.name == null) {
    if (ofServer.length === 0) throw noChosenTool(choice.server_label, "has no tool you may call");
    return { tools: ofServer, toolChoice: "required" };
  }
  const chosen = ofServer.find((t) => hosted.get(t.name)?.tool === choice.name);
  if (!chosen) throw noChosenTool(choice.server_label, `has no tool '${choice.name}' that you may call`);
  return { tools: [chosen], toolChoice: { name: chosen.name } };
}

/** After a first round that had to call a tool, the model chooses: "auto", unless the request said "none". */
const laterChoice = (choice: ChatRequest["toolChoice"]): ChatRequest["toolChoice"] =>
  choice === "none" ? "none" : choice === undefined ? undefined : "auto";

const noChosenTool = (label: string, what: string) =>
  new ValidationFailed([
    {
      loc: ["body", "tool_choice"],
      msg: `Value error, the MCP server '${label}' ${what}`,
      type: "value_error",
      input: label,
    },
  ]);

/** The registered server behind a hosted tool's `server_url`; 422 at its loc for any other URL. */
function serverIdOf(config: HostedMcpConfig, url: string, index: number): string {
  for (const base of [config.gatewayPublicUrl, config.gatewayUrl]) {
    const id = serverOfProxyUrl(base, url);
    if (id) return id;
  }
  throw badServerUrl(
    index,
    url,
    `Value error, server_url must be an MCP server's proxy URL on this gateway (${mcpProxyUrl(config.gatewayPublicUrl, "{id}")})`,
  );
}

/** 422 at the tool's `server_url`, showing it without a password it may hold. */
const badServerUrl = (index: number, url: string, msg: string) => {
  const shown = urlWithoutCredentials(url);
  return new ValidationFailed([
    {
      loc: ["body", "tools", index, "server_url"],
      msg,
      type: "value_error",
      ...(shown !== undefined ? { input: shown } : {}),
    },
  ]);
};

const textOfResult = (result: { content?: { type: string; text?: string }[] }) =>
  (result.content ?? [])
    .map((part) => (part.type === "text" ? (part.text ?? "") : `[${part.type}]`))
    .join("");

/**
 * A response turn with hosted MCP tools (docs/api/mcp.md): each server's
 * tools the principal may call (an `mcp_list_tools` item), given to the model
 * as functions; the model's calls run through the gateway's proxy as the
 * principal (the same authorization and vault; `mcp_call` items), or, when
 * `require_approval` asks, end the turn with `mcp_approval_request` items
 * (stored with the server's id, the tool, the arguments and the principal).
 * Each model call goes through the one model-call pipeline (admission,
 * settlement), and tools run only after the round that carries their results
 * is admitted; the response is kept once, with the last.
 */
export async function startHostedTurn(
  deps: ResponseTurnDeps & { hostedMcp: HostedMcpConfig },
  caller: Caller,
  input: CreateResponseInput,
): Promise<ResponseTurn> {
  const { principal } = caller;
  deps.provider.assertConfigured();
  const config = deps.hostedMcp;
  const specs = (input.tools ?? []).flatMap((t, index) =>
    t.type === "mcp" ? [{ spec: t, index, serverId: serverIdOf(config, t.server_url, index) }] : [],
  );
  const { model, turn, request } = await prepareTurn(deps, principal, input, "writer");
  const response = draftResponse(input, deps.ids.newId("resp"), model, deps.clock.wall());

  const redactedBy = new Set<string>();
  const run = async (signal: AbortSignal, events?: HostedEvents): Promise<ResponseObject> => {
    const output: OutputItem[] = [];
    const hosted = new Map<string, HostedTool>();
    const taken = new Set((request.tools ?? []).map((t) => t.name));
    const tools = [...(request.tools ?? [])];
    for (const { spec, index, serverId } of specs) {
      const item: McpListToolsItem = {
        type: "mcp_list_tools",
        id: deps.ids.newId(ID_PREFIX.mcp_list_tools),
        server_label: spec.server_label,
        tools: [],
      };
      events?.listing(item);
      const answer = await proxyListTools(config, principal, serverId, signal);
      if (!answer.ok && answer.status === 404)
        throw badServerUrl(index, spec.server_url, "Value error, no MCP server you may use has this URL");
      if (!answer.ok) item.error = answer.message;
      const offered = answer.ok ? answer.result : [];
      for (const tool of offered) {
        const readOnly = tool.annotations?.readOnlyHint === true;
        if (!allowed(spec, tool.name, readOnly)) continue;
        item.tools.push({
          name: tool.name,
          ...(typeof tool.description === "string" ? { description: tool.description } : {}),
          input_schema: tool.inputSchema ?? { type: "object" },
          ...(tool.annotations ? { annotations: tool.annotations } : {}),
        });
        const name = functionName(spec.server_label, tool.name, taken);
        hosted.set(name, { label: spec.server_label, serverId, spec, tool: tool.name, readOnly });
        tools.push({
          name,
          ...(tool.description ? { description: tool.description } : {}),
          parameters: (tool.inputSchema as Record<string, unknown> | undefined) ?? { type: "object" },
        });
      }
      output.push(item);
      events?.listed(item);
    }

    const first = firstRound(input.tool_choice, request, tools, hosted);
    // Tool calls whose results the next model round carries. They run only once that round is admitted:
    // a round refused (a budget) runs no tool, and a client that retries does not run it twice.
    let pending = await approvalAnswers(deps, principal, input, turn, hosted, output, events);
    // Answers to approval requests open the stream once they are claimed (a conflict is still a 409).
    const answering = pending !== undefined;
    let messages: ChatMessage[] = [...request.messages];
    const earlier = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
    const redacted = (ids: string[]) => {
      for (const id of ids) redactedBy.add(id);
    };
    for (let round = 0; ; round++) {
      const last = round === MAX_ROUNDS - 1;
      // Rounds after the first fail with the response's id released (the first's call releases its own).
      const abandon = async (err: unknown): Promise<never> => {
        if (round > 0 && input.store)
          await releaseOwnership(deps.authorization, principal, { type: "response", id: response.id });
        throw err;
      };
      // Admitted without the pending calls' results, which are added, and counted, once they ran.
      // A tool the request makes the model call is its first round's: the rounds after it, which
      // carry that call's result, choose freely (else the model would be made to call tools until the last).
      const roundRequest = {
        ...request,
        messages: pending ? [...messages, pending.assistant] : messages,
        ...(round === 0 && !answering ? first : { tools, toolChoice: laterChoice(request.toolChoice) }),
        ...(last ? { toolChoice: "none" as const } : {}),
      };
      type Decision = { done: true } | { done: false; completion: Completion };
      const call = await admitCall<Decision, StreamedCall>(deps, {
        caller,
        request: roundRequest,
        owned: round === 0 && input.store ? { type: "response", id: response.id } : undefined,
        keep: async (completion) => {
          const calls = completion.toolCalls;
          const ours = calls.filter((c) => hosted.has(c.name));
          const final = last || ours.length === 0 || ours.length !== calls.length;
          const approvals = final ? [] : ours.filter((c) => needsApproval(hosted.get(c.name)!));
          if (!final && approvals.length === 0) return { done: false, completion };
          const asked: NewApproval[] = [];
          const answerItems: OutputItem[] =
            approvals.length > 0
              ? [
                  ...(completion.text ? outputOf({ ...completion, toolCalls: [] }, deps.ids) : []),
                  ...ours.map((c): OutputItem => {
                    const tool = hosted.get(c.name)!;
                    const id = deps.ids.newId(ID_PREFIX.mcp_approval_request);
                    asked.push({ id, serverId: tool.serverId, tool: tool.tool, arguments: c.arguments });
                    return {
                      type: "mcp_approval_request",
                      id,
                      server_label: tool.label,
                      name: tool.tool,
                      arguments: c.arguments,
                    };
                  }),
                ]
              : outputOf(completion, deps.ids);
          settle(response, completion, [...output, ...answerItems], deps.clock.wall());
          addUsage(response, earlier);
          await keep(deps, principal, response, input, turn, completion, asked);
          return { done: true };
        },
      }).catch(abandon);
      // Checked and admitted: from here on, each event leaves as it happens.
      if (round > 0 || !answering) events?.open();
      if (pending) {
        const results = await pending.run(signal).catch(async (err: unknown) => {
          await call.release();
          return abandon(err);
        });
        roundRequest.messages = [...roundRequest.messages, ...results];
        // The results were not in the admitted prompt (they did not exist): charged as counted now.
        await call.promptGrew().catch(abandon);
      }
      const decision = await call.answer(signal).catch(abandon);
      redacted(call.redactedBy());
      if (decision.done) return response;
      const { completion } = decision;
      earlier.input_tokens += completion.usage.input_tokens;
      earlier.output_tokens += completion.usage.output_tokens;
      earlier.total_tokens += completion.usage.total_tokens;
      messages = roundRequest.messages;
      pending = {
        assistant: { role: "assistant", content: completion.text, toolCalls: completion.toolCalls },
        run: async (signal) => {
          const results: ChatMessage[] = [];
          for (const c of completion.toolCalls as ToolCall[]) {
            const item = await runTool(config, deps.ids, principal, hosted.get(c.name)!, c, signal, events);
            output.push(item);
            results.push({ role: "tool", toolCallId: c.id, content: item.output ?? `Error: ${item.error}` });
          }
          return results;
        },
      };
    }
  };

  return {
    windows: [],
    response,
    request,
    provider: deps.provider,
    redactedBy: () => [...redactedBy].sort(),
    answer: (signal) => run(signal),
    stream: () => Promise.reject(new Error("A hosted MCP turn streams its own events (streamLive)")),
    streamLive: async (sink, signal, beforeOpen) => {
      const events = new HostedEvents(sink, deps.logger, response, beforeOpen);
      let answered: ResponseObject;
      try {
        answered = await run(signal, events);
      } catch (err) {
        if (!events.opened) throw err;
        events.fail(response, err, signal);
        return;
      }
      events.finish(answered);
    },
  };
}

/** Tool calls waiting to run: the assistant message that made them, and running them (their `tool` messages). */
interface PendingCalls {
  assistant: ChatMessage;
  run(signal: AbortSignal): Promise<ChatMessage[]>;
}

const alreadyAnswered = (id: string) =>
  new AppError("conflict", `The approval request ${id} was answered already: an approval is answered once`, {
    param: "input",
  });

/** Item types only a response's output has: after one of them in the input, the model has already answered. */
const PRODUCED = new Set<Item["type"]>([
  "mcp_list_tools",
  "mcp_call",
  "mcp_approval_request",
  "function_call",
  "file_search_call",
]);

/**
 * The turn's answers to approval requests: its `mcp_approval_response`
 * items that no output of the model follows. A client that keeps its own
 * history sends its earlier answers back with the turns that followed them
 * (the call they ran, the model's message): those are history, not answers.
 */
export function answersIn(turn: Item[]): McpApprovalResponseItem[] {
  const lastProduced = turn.findLastIndex(
    (item) => PRODUCED.has(item.type) || (item.type === "message" && item.role === "assistant"),
  );
  return turn.flatMap((item, index) =>
    item.type === "mcp_approval_response" && index > lastProduced ? [item] : [],
  );
}

/**
 * The caller's answers (`mcp_approval_response` items of the turn, see
 * `answersIn`) to `mcp_approval_request`s this gateway stored: those of the
 * response named by `previous_response_id` when there is one, else looked
 * up by their ids alone (clients that keep their own history send the
 * request and its answer back without it); an id the gateway never asked is
 * refused (422). Checked now and claimed when they run: each request is answered once
 * (again: 409), only by the principal it was asked of (org and user; anyone
 * else: 403, whatever role they hold on the response), and runs on the
 * registered server and tool it named (by the server's id: a server
 * registered anew under the same label is another), which this request's
 * tools must offer. Running them claims them all (a conditional UPDATE, so
 * of two answers at once one runs and the other is 409), then runs the
 * approved calls (`mcp_call` items); the model is told of each as a tool
 * call and its result.
 */
async function approvalAnswers(
  deps: ResponseTurnDeps & { hostedMcp: HostedMcpConfig },
  principal: Principal,
  input: CreateResponseInput,
  turn: Item[],
  hosted: Map<string, HostedTool>,
  output: OutputItem[],
  events: HostedEvents | undefined,
): Promise<PendingCalls | undefined> {
  const answers = answersIn(turn);
  if (answers.length === 0) return undefined;
  const refuse = (msg: string, value: string) =>
    new ValidationFailed([
      { loc: ["body", "input"], msg: `Value error, ${msg}`, type: "value_error", input: value },
    ]);
  const previousId = input.previous_response_id;
  const store = deps.responses.approvals;
  const checked: {
    answer: McpApprovalResponseItem;
    request: ApprovalRequest;
    call: ToolCall;
    tool: HostedTool;
  }[] = [];
  for (const answer of answers) {
    const id = answer.approval_request_id;
    if (checked.some((c) => c.request.id === id)) throw refuse("this approval request is answered twice", id);
    const request = await store.get(principal.org, id);
    // Only a request this gateway asked (and stored) can be answered: an id it never issued runs nothing.
    if (!request) throw refuse("no approval request with this id was asked by this gateway", id);
    if (previousId !== undefined && request.responseId !== previousId)
      throw refuse("no approval request with this id in previous_response_id", id);
    if (request.user !== principal.user)
      throw forbidden(`The approval request ${id} was asked of another user: only they may answer it`, {
        param: "input",
      });
    if (request.answered) throw alreadyAnswered(id);
    const entry = [...hosted.entries()].find(
      ([, t]) => t.serverId === request.serverId && t.tool === request.tool,
    );
    if (!entry)
      throw refuse(
        `the tool ${request.tool} of the MCP server ${request.serverId} is not among this request's tools`,
        id,
      );
    const [name, tool] = entry;
    checked.push({
      answer,
      request,
      tool,
      call: { id: deps.ids.newId("call"), name, arguments: request.arguments },
    });
  }
  const { hooks } = deps.hostedMcp;
  return {
    assistant: { role: "assistant", content: "", toolCalls: checked.map((c) => c.call) },
    run: async (signal) => {
      const ids = checked.map((c) => c.request.id);
      await hooks?.beforeClaim?.(ids);
      const answered = checked.map((c) => ({ id: c.request.id, approve: c.answer.approve }));
      const lost = await store.claim(principal.org, principal.user, answered);
      if (lost) throw alreadyAnswered(lost);
      await hooks?.afterClaim?.(ids);
      events?.open();
      const results: ChatMessage[] = [];
      for (const { answer, request, call, tool } of checked) {
        if (!answer.approve) {
          results.push({
            role: "tool",
            toolCallId: call.id,
            content: "The caller did not approve this call.",
          });
          continue;
        }
        const item = await runTool(
          deps.hostedMcp,
          deps.ids,
          principal,
          tool,
          call,
          signal,
          events,
          request.id,
        );
        output.push(item);
        results.push({ role: "tool", toolCallId: call.id, content: item.output ?? `Error: ${item.error}` });
      }
      return results;
    },
  };
}

async function runTool(
  config: HostedMcpConfig,
  ids: Ids,
  principal: Principal,
  tool: HostedTool,
  call: ToolCall,
  signal: AbortSignal,
  events: HostedEvents | undefined,
  approvalRequestId: string | null = null,
): Promise<McpCallItem> {
  const item: McpCallItem = {
    type: "mcp_call",
    id: ids.newId(ID_PREFIX.mcp_call),
    status: "completed",
    server_label: tool.label,
    name: tool.tool,
    arguments: call.arguments,
    output: null,
    error: null,
    approval_request_id: approvalRequestId,
  };
  events?.calling(item);
  const ran = await callTool(config, principal, tool, item, signal);
  events?.called(ran);
  return ran;
}

async function callTool(
  config: HostedMcpConfig,
  principal: Principal,
  tool: HostedTool,
  item: McpCallItem,
  signal: AbortSignal,
): Promise<McpCallItem> {
  let args: unknown;
  try {
    args = item.arguments ? JSON.parse(item.arguments) : {};
  } catch {
    return { ...item, status: "failed", error: "The model's arguments are not JSON" };
  }
  const answer = await proxyCallTool(config, principal, tool.serverId, tool.tool, args, signal);
  if (!answer.ok) return { ...item, status: "failed", error: answer.message };
  const text = textOfResult(answer.result);
  if (answer.result.isError === true) return { ...item, status: "failed", error: text || "The tool failed" };
  return { ...item, output: text };
}

function addUsage(
  response: ResponseObject,
  earlier: { input_tokens: number; output_tokens: number; total_tokens: number },
) {
  const usage = response.usage;
  if (!usage) return;
  usage.input_tokens += earlier.input_tokens;
  usage.output_tokens += earlier.output_tokens;
  usage.total_tokens += earlier.total_tokens;
}

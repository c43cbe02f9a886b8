import type { Logger } from "@gw/core/logger";
import { type EventSink, logStreamFailure } from "../calls/event-sink.ts";
import type { McpCallItem, McpListToolsItem } from "../items/items.ts";
import { failed } from "./response.ts";
import type { OutputItem, ResponseObject } from "./store.ts";

/**
 * A hosted MCP turn's Responses events, sent as the turn does each thing,
 * in OpenAI's order: `response.created`, each server's listing
 * (`output_item.added`, `response.mcp_list_tools.in_progress`, then
 * `.completed` or `.failed` and `output_item.done` once the proxy answered),
 * each tool call (`output_item.added`, `response.mcp_call.in_progress`, the
 * arguments' `delta` and `done`, then `.completed` or `.failed` and
 * `output_item.done` once the tool answered), the model's answer, then
 * `response.completed` once the response is stored.
 *
 * Events are held until `open`: the turn opens the stream once its checks
 * passed and its first model round is admitted, so that a refusal until then
 * (a `server_url` no server has, an approval answered already, a budget) is
 * an ordinary error answer; from then on each event leaves as it happens,
 * and a failure ends the stream with `response.failed`.
 */
/** An `mcp_call` as its `response.output_item.added` shows it, before the tool answered. */
type RunningCall = Omit<McpCallItem, "status"> & { status: "in_progress" };

export class HostedEvents {
  private sequence = 0;
  private held: string[] | undefined = [];
  /** The items whose events were sent, by their output index (a call still running as it was added). */
  private readonly items: (OutputItem | RunningCall)[] = [];
  private readonly sink: EventSink;
  private readonly logger: Logger;
  private readonly beforeOpen: () => void;

  constructor(sink: EventSink, logger: Logger, response: ResponseObject, beforeOpen: () => void) {
    this.sink = sink;
    this.logger = logger;
    this.beforeOpen = beforeOpen;
    const begun = { ...response, status: "in_progress", output: [], usage: null, completed_at: null };
    this.send("response.created", { response: begun });
    this.send("response.in_progress", { response: begun });
  }

  /** Whether the stream has begun: a failure now is a `response.failed` event, not an error answer. */
  get opened(): boolean {
    return this.held === undefined;
  }

  /** Begins the stream with the events held so far. */
  open(): void {
    if (!this.held) return;
    this.beforeOpen();
    this.sink.open();
    for (const text of this.held) this.sink.write(text);
    this.held = undefined;
  }

  /** A server's tools are being listed. */
  listing(item: McpListToolsItem): void {
    const at = this.add({ ...item, tools: [] });
    this.send("response.mcp_list_tools.in_progress", at);
  }

  listed(item: McpListToolsItem): void {
    const at = this.at(item);
    this.send(item.error ? "response.mcp_list_tools.failed" : "response.mcp_list_tools.completed", at);
    this.done(item, at.output_index);
  }

  /** A tool call is about to run through the proxy. */
  calling(item: McpCallItem): void {
    const at = this.add({ ...item, status: "in_progress", output: null, error: null });
    this.send("response.mcp_call.in_progress", at);
    this.send("response.mcp_call_arguments.delta", { ...at, delta: item.arguments });
    this.send("response.mcp_call_arguments.done", { ...at, arguments: item.arguments });
  }

  called(item: McpCallItem): void {
    const at = this.at(item);
    this.send(item.status === "failed" ? "response.mcp_call.failed" : "response.mcp_call.completed", at);
    this.done(item, at.output_index);
  }

  /** The stored response: the items not sent yet (the model's answer), then `response.completed`. */
  finish(response: ResponseObject): void {
    this.open();
    for (const item of response.output.slice(this.items.length)) {
      const at = this.add(item);
      if (item.type === "message") {
        const text = item.content[0]?.text ?? "";
        const part = { type: "output_text", text: "", annotations: [], logprobs: [] };
        this.send("response.content_part.added", { ...at, content_index: 0, part });
        if (text)
          this.send("response.output_text.delta", { ...at, content_index: 0, delta: text, logprobs: [] });
        this.send("response.output_text.done", { ...at, content_index: 0, text, logprobs: [] });
        this.send("response.content_part.done", { ...at, content_index: 0, part: { ...part, text } });
      } else if (item.type === "function_call") {
        this.send("response.function_call_arguments.delta", { ...at, delta: item.arguments });
        this.send("response.function_call_arguments.done", { ...at, arguments: item.arguments });
      }
      this.done(item, at.output_index);
    }
    this.send(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
    this.sink.end();
  }

  /** Ends a begun stream with `response.failed`, carrying what was done so far. */
  fail(response: ResponseObject, err: unknown, signal: AbortSignal): void {
    if (signal.aborted || this.sink.ended) return;
    logStreamFailure(this.logger, this.sink, err, "response");
    // A call the failure cut short did not end: failed, as the response is.
    const output = this.items.map(
      (item): OutputItem =>
        item.type === "mcp_call" && item.status === "in_progress"
          ? { ...item, status: "failed", error: "The response failed before the call ended" }
          : (item as OutputItem),
    );
    this.send("response.failed", { response: failed(response, output, err, undefined) });
    this.sink.end();
  }

  private add(item: OutputItem | RunningCall): { item_id: string; output_index: number } {
    const output_index = this.items.length;
    this.items.push(item);
    this.send("response.output_item.added", { output_index, item });
    return { item_id: item.id, output_index };
  }

  private at(item: { id: string }): { item_id: string; output_index: number } {
    return { item_id: item.id, output_index: this.items.findIndex((i) => i.id === item.id) };
  }

  private done(item: OutputItem, output_index: number): void {
    this.items[output_index] = item;
    this.send("response.output_item.done", { output_index, item });
  }

  private send(type: string, data: Record<string, unknown>): void {
    const text = `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...data })}\n\n`;
    if (this.held) this.held.push(text);
    else this.sink.write(text);
  }
}

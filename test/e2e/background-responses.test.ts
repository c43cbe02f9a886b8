import { pythonPrints, useOpenaiPython } from "@gw/test-kit/python-venv";
import OpenAI, { BadRequestError } from "openai";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * The official `openai` SDK's background mode, unchanged, through the
 * gateway: `responses.create({ background: true })` answers queued,
 * `responses.retrieve` polls it to completed, `responses.cancel` stops a
 * running one, and a streamed one resumes with `starting_after`.
 */
// A held provider call must outlast a Python process's start (the stack's default gives a call 1 s).
const stack = useStack({ LLM_TIMEOUT_MS: "60000" });

afterEach(() => {
  stack.llm.mode = "ok";
  stack.llm.release();
});

const client = (secret: string) =>
  new OpenAI({
    apiKey: secret,
    baseURL: `${stack.gatewayUrl}/api/v1/llm`,
    defaultHeaders: { "X-On-Behalf-Of": "alice" },
    maxRetries: 0,
  });

describe("the official openai SDK's background responses", () => {
  it("creates one queued and polls it to completed with responses.retrieve", async () => {
    const openai = client((await stack.createKey()).secret);
    const queued = await openai.responses.create({ input: "tell me later", background: true });
    expect(queued).toMatchObject({ status: "queued", background: true });
    let response = queued;
    await vi.waitFor(
      async () => {
        response = await openai.responses.retrieve(queued.id);
        expect(response.status).toBe("completed");
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(response.output_text).toBe("Echo: tell me later");
    const refused = await openai.responses.cancel(queued.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BadRequestError);
  });

  it("cancels a running one with responses.cancel: the provider call is aborted", async () => {
    const openai = client((await stack.createKey()).secret);
    stack.llm.mode = "hold-midstream";
    const before = stack.llm.requests.length;
    const queued = await openai.responses.create({ input: "a long one", background: true });
    await vi.waitFor(() => expect(stack.llm.requests.length).toBe(before + 1), { timeout: 10_000 });
    await vi.waitFor(async () =>
      expect((await openai.responses.retrieve(queued.id)).status).toBe("in_progress"),
    );
    const cancelled = await openai.responses.cancel(queued.id);
    expect(cancelled).toMatchObject({ id: queued.id, status: "cancelled" });
    await vi.waitFor(() => expect(stack.llm.requests.at(-1)?.aborted).toBe(true), { timeout: 10_000 });
    expect((await openai.responses.retrieve(queued.id)).status).toBe("cancelled");
  });

  it("streams one, and resumes its stream after a sequence number with responses.retrieve", async () => {
    const openai = client((await stack.createKey()).secret);
    const stream = await openai.responses.create({ input: "one two three", background: true, stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events[0]?.type).toBe("response.created");
    expect(events.at(-1)?.type).toBe("response.completed");
    const id = (events[0] as { response: { id: string } }).response.id;
    const resumed = await openai.responses.retrieve(id, { stream: true, starting_after: 3 });
    const rest: ResponseStreamEvent[] = [];
    for await (const event of resumed) rest.push(event);
    expect(rest).toEqual(events.slice(4));
    expect(rest[0]?.sequence_number).toBe(4);
  });
});

describe("openai-python's background responses", () => {
  const openaiPython = useOpenaiPython();
  it("creates one queued, polls it to completed, and cancels a running one", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await stack.createKey();
    stack.llm.mode = "hold-midstream";
    const env = { GATEWAY_URL: stack.gatewayUrl, GATEWAY_KEY: key.secret };
    const connect =
      "import json, os, sys, time, openai\nclient = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0, default_headers={'X-On-Behalf-Of': 'alice'})";
    const before = stack.llm.requests.length;
    const held = JSON.parse(
      await pythonPrints(
        python,
        [
          "-c",
          `${connect}\nr = client.responses.create(input='a long one', background=True)\nprint(json.dumps({'id': r.id, 'status': r.status}))`,
        ],
        env,
      ),
    );
    expect(held.status).toBe("queued");
    // Running: the provider has the call and holds it (as the JS client's test waits, so nothing races).
    await vi.waitFor(() => expect(stack.llm.requests.length).toBe(before + 1), { timeout: 30_000 });
    await vi.waitFor(
      async () => {
        const seen = await client(key.secret).responses.retrieve(held.id);
        expect({ status: seen.status, error: seen.error }).toEqual({ status: "in_progress", error: null });
      },
      { timeout: 30_000 },
    );
    const cancelled = JSON.parse(
      await pythonPrints(
        python,
        [
          "-c",
          `${connect}\nr = client.responses.cancel(sys.argv[1])\nprint(json.dumps({'status': r.status}))`,
          held.id,
        ],
        env,
      ),
    );
    expect(cancelled).toEqual({ status: "cancelled" });
    stack.llm.release();
    const polled = [
      "import json, os, time, openai",
      "client = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0)",
      "r = client.responses.create(input='tell me later', background=True)",
      "first = r.status",
      "deadline = time.time() + 60",
      "while r.status in ('queued', 'in_progress') and time.time() < deadline:",
      "    time.sleep(0.05)",
      "    r = client.responses.retrieve(r.id)",
      "print(json.dumps({'first': first, 'status': r.status, 'text': r.output_text}))",
    ].join("\n");
    const done = JSON.parse(await pythonPrints(python, ["-c", polled], env));
    expect(done).toEqual({ first: "queued", status: "completed", text: "Echo: tell me later" });
    // Two Python processes (each importing openai) and a poll: more than the default on a busy machine.
  }, 120_000);
});

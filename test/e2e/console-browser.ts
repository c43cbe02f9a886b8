import { PERMISSIONS, type Permission } from "@gw/core/permissions";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import {
  createKey,
  newDataDir,
  type RunningStack,
  removeDataDir,
  stackEnv,
  startStack,
  workerVectors,
} from "./pnpm-start.ts";

/** Debian's Chromium (`apt-get install chromium`): Playwright's own browser download cannot run here. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export interface ConsoleStack {
  stack: RunningStack;
  env: NodeJS.ProcessEnv;
  llm: FakeLLM;
  url: string;
  /** `GATEWAY_PUBLIC_URL` (its default, `http://localhost:$PORT`): the issuer and the MCP proxies' resource URLs. */
  publicUrl: string;
  browser: Browser;
  /** The organization's root key (every permission, `admin:console` too). */
  root: { key: string; id: string };
  close(): Promise<void>;
}

/** `pnpm start` with a fake provider (priced, so usage has a cost), private MCP upstreams allowed, a root key of `acme`, and Chromium. */
export async function startConsoleStack(
  dataPrefix: string,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<ConsoleStack> {
  const dataDir = await newDataDir(dataPrefix);
  const llm = await startFakeLLM();
  const env = await stackEnv(dataDir, {
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
    LLM_MODELS: "echo-small=2/1/8,echo-large=10/5/30",
    // The tool servers page registers a local upstream MCP server (`@gw/test-kit/mcp-upstream`).
    MCP_ALLOW_PRIVATE_UPSTREAMS: "true",
    ...(await workerVectors()),
    ...extraEnv,
  });
  const stack = await startStack(env);
  const root = await createKey(env, {
    org: "acme",
    owner: "alice",
    name: "root",
    permissions: [...PERMISSIONS],
  });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // A fresh profile each launch (Playwright passes its own --user-data-dir).
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    stack,
    env,
    llm,
    url: stack.gatewayUrl,
    publicUrl: `http://localhost:${env.PORT}`,
    browser,
    root,
    async close() {
      await browser.close().catch(() => {});
      await stack.interrupt();
      await llm.close();
      await removeDataDir(dataDir);
    },
  };
}

/** Every console error and uncaught exception of a page, and every dialog it opened (an XSS `alert`). */
export function watch(page: Page): { errors: string[]; dialogs: string[] } {
  const seen = { errors: [] as string[], dialogs: [] as string[] };
  page.on("console", (msg) => {
    if (msg.type() === "error") seen.errors.push(`${page.url()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => seen.errors.push(`${page.url()}: ${err.message}`));
  page.on("dialog", (dialog) => {
    seen.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return seen;
}

/** Signs in through the form, as a person does. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/admin/`);
  await page.getByLabel("API key with admin:console").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForLoadState("networkidle");
}

export async function newContext(
  browser: Browser,
  size: { width: number; height: number },
): Promise<BrowserContext> {
  return browser.newContext({ viewport: size, deviceScaleFactor: 1 });
}

/** A model call with a key, as a client of the API makes it. */
export async function respond(url: string, key: string, model: string, user?: string): Promise<Response> {
  return fetch(`${url}/api/v1/llm/responses`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
      ...(user ? { "X-On-Behalf-Of": user } : {}),
    },
    body: JSON.stringify({ model, input: "hello there, console" }),
  });
}

/** `a,b` as a list of permissions. */
const permissionsOf = (list: string) => list.split(",") as Permission[];

/** A key in the stack's organization `acme` (`permissions` as `pnpm keys create --permissions` takes them). */
export function createKeyFor(
  s: ConsoleStack,
  owner: string,
  permissions: string,
): Promise<{ key: string; id: string }> {
  return createKey(s.env, { org: "acme", owner, permissions: permissionsOf(permissions) });
}

/**
 * `pnpm console:screenshots`: runs `pnpm start` (a fake provider behind it), makes some keys, traffic,
 * a shared conversation, an eval schedule and a tool server, then photographs every console page in Debian's Chromium
 * at 1280×800 and 390×844 into `docs/console/`, and writes `docs/console.md` around them.
 */
import { randomUUID } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import type { Page } from "playwright-core";
import { createKeyFor, newContext, respond, signIn, startConsoleStack } from "./console-browser.ts";

const SIZES = [
  { name: "desktop", width: 1280, height: 800 },
  { name: "phone", width: 390, height: 844 },
] as const;

interface Shot {
  file: string;
  title: string;
  what: string;
}

const s = await startConsoleStack("gw-console-shots-");
let upstream: FakeMcpServer | undefined;
try {
  const json = (path: string, body: unknown, key = s.root.key) =>
    fetch(`${s.url}/api/v1${path}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    }).then(async (r) => {
      if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
      return r.status === 204 ? undefined : r.json();
    });

  // A limited key for a product team, and traffic from two of its end users.
  const team = (await json("/admin/api-keys", {
    owner: "search-team",
    name: "search backend",
    limits: {
      second: 5,
      tokens: { minute: 100_000 },
      spend: { month: 50 },
      endUser: { tokens: { day: 20_000 } },
    },
    models: ["echo-small"],
    onBehalfOf: { prefixes: ["user-"] },
  })) as { key: string; id: string };
  await createKeyFor(s, "bi-team", "usage:read");
  for (const user of ["user-17", "user-17", "user-42"]) await respond(s.url, team.key, "echo-small", user);
  await respond(s.url, s.root.key, "echo-large");

  // A conversation alice shares with bob, and an eval schedule.
  const conv = (await json("/llm/conversations", {})) as { id: string };
  await json("/authorization/llm/grant", {
    resourceType: "conversation",
    resourceId: conv.id,
    userId: "bob",
    role: "reader",
  });
  await json("/authorization/llm/grant", {
    resourceType: "conversation",
    resourceId: conv.id,
    userId: "carol",
    role: "writer",
    expiresAt: new Date(Date.now() + 7 * 86_400_000).toISOString(),
  });
  await json("/llm/evals/schedules", {
    name: "nightly regression",
    model: "echo-small",
    inputs: [{ input: "2+2", expected: "4" }],
    cron: "0 3 * * *",
    timezone: "UTC",
  });

  // A tool server (a local upstream MCP server) with a shared credential, read by bob.
  upstream = await startFakeMcpServer();
  const mcpServer = (await json("/mcp/servers", {
    name: "docs",
    url: upstream.url,
    description: "The team's documents",
  })) as { id: string };
  const put = async (path: string, body: unknown) => {
    const r = await fetch(`${s.url}/api/v1${path}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  };
  await put(`/mcp/servers/${mcpServer.id}/credentials/shared`, { type: "bearer", token: randomUUID() });
  await put(`/mcp/servers/${mcpServer.id}/tools/send_email`, { required_role: "owner" });
  await json("/authorization/llm/grant", {
    resourceType: "mcp_server",
    resourceId: mcpServer.id,
    userId: "bob",
    role: "reader",
  });

  const dir = join(REPO_ROOT, "docs", "console");
  await mkdir(dir, { recursive: true });
  const shots: Shot[] = [];
  for (const size of SIZES) {
    const context = await newContext(s.browser, size);
    const page = await context.newPage();
    const take = async (name: string, title: string, what: string, before?: (p: Page) => Promise<void>) => {
      await before?.(page);
      await page.waitForLoadState("networkidle");
      const file = `${name}-${size.name}.png`;
      await page.screenshot({ path: join(dir, file), fullPage: true });
      if (size.name === "desktop") shots.push({ file: name, title, what });
    };
    await page.goto(`${s.url}/admin/sign-in`);
    await take(
      "sign-in",
      "Sign in",
      "An API key with `admin:console` is sent once and exchanged for a session.",
    );
    await signIn(page, s.url, s.root.key);
    await take(
      "keys",
      "Keys",
      "Every key of the organization with all its fields; create, change, revoke; the end-user defaults below.",
    );
    await take("key-created", "A new key's secret, shown once", "With its copy button.", async (p) => {
      await p.getByRole("button", { name: "New key" }).click();
      await p.getByLabel("Name").fill("mobile app");
      await p.getByLabel("Owner (user id)").fill("mobile-team");
      await p.locator("#new-req-minute").fill("600");
      await p.locator("#new-tok-day").fill("2000000");
      await p.getByRole("button", { name: "Create key" }).click();
      await p.locator("#new-secret").waitFor();
    });
    await take(
      "usage",
      "Usage and spend",
      "Per day, per key, per end user and per model, as charts and tables; a key's windows now.",
      async (p) => {
        await p.goto(`${s.url}/admin/usage`);
        await p.locator("#windows-key").selectOption(team.id);
        await p.getByRole("button", { name: "Show windows" }).click();
        await p.getByRole("table", { name: "Each window of each unit: used, limit, resets at" }).waitFor();
      },
    );
    await take(
      "access-resource",
      "Access: a resource",
      "Who holds which role, with expiries, and the resource's audit trail.",
      async (p) => {
        await p.goto(`${s.url}/admin/access?resourceType=conversation&resourceId=${conv.id}`);
        await p.getByRole("table", { name: "Who holds which role" }).waitFor();
      },
    );
    await take("access-user", "Access: a user", "What a user can read, of each type.", async (p) => {
      await p.goto(`${s.url}/admin/access?userId=bob`);
      await p.getByRole("table", { name: "Resources bob can read, by type" }).waitFor();
    });
    await take(
      "audit",
      "Audit trail",
      "Filtered by actor, resource, action and time, paged, with the decision and ZedToken.",
      async (p) => {
        await p.goto(`${s.url}/admin/audit`);
        await p.getByRole("table", { name: "The organization's audit trail, newest first" }).waitFor();
      },
    );
    await take("evals", "Eval schedules", "Schedules, their runs, delete.", async (p) => {
      await p.goto(`${s.url}/admin/evals`);
      await p.getByRole("table", { name: "The organization's eval schedules" }).waitFor();
    });
    await take(
      "tools",
      "Tool servers",
      "Registered MCP servers; a server's tools with the role each needs, and its credentials by scope and date (never a secret). Its id leads to who holds which role on it.",
      async (p) => {
        await p.goto(`${s.url}/admin/tools`);
        await p.getByRole("button", { name: "Tools and credentials of docs" }).click();
        await p.getByRole("table", { name: "Tools of docs and the role each needs" }).waitFor();
        // Clicking scrolled the servers' table sideways on a phone; show each table from its start.
        await p.evaluate(`document.querySelectorAll(".table-wrap").forEach((t) => { t.scrollLeft = 0; })`);
      },
    );
    await page.getByRole("button", { name: "Sign out" }).click();
    await take("signed-out", "Signed out", "Sign-out ends the session on the server.");
    await context.close();
  }

  const body = shots
    .map(
      (shot) =>
        `## ${shot.title}\n\n${shot.what}\n\n| 1280×800 | 390×844 |\n| --- | --- |\n| ![${shot.title} at 1280×800](console/${shot.file}-desktop.png) | ![${shot.title} at 390×844](console/${shot.file}-phone.png) |\n`,
    )
    .join("\n");
  await writeFile(
    join(REPO_ROOT, "docs", "console.md"),
    `# The admin console

Pages under \`/admin/\` on the gateway's own origin for an organization's administrators: open
\`http://127.0.0.1:8080/admin/\` on \`pnpm start\` and sign in with a key that has \`admin:console\` (an
organization's root key: \`pnpm keys create --org acme --owner alice --permissions all\`). How it is built and
why: [ADR 0013](adr/0013-admin-console.md); the API it calls: [admin](api/admin.md),
[authorization](api/authorization.md), [usage](api/llm.md).

| page | what | API it calls |
| --- | --- | --- |
| Keys | every key with all its fields; create (the secret shown once), change limits, models, policy and permissions, revoke with a confirmation; the organization's end-user defaults | \`/api/v1/admin/api-keys\`, \`/api/v1/admin/end-user-limits\` |
| Usage and spend | requests, tokens and cost per day, per key, per end user, per model, over a range; one key's windows now | \`/api/v1/usage?group_by=day\\|key\\|end_user\\|model\`, \`/api/v1/admin/api-keys/{id}/usage\` |
| Access | a resource: who holds which role, expiries, its trail (grant and revoke when you own it); a user: what they can read | \`/api/v1/admin/authorization/…\`, \`/api/v1/authorization/llm/check\\|grant\\|revoke\`, \`/api/v1/admin/audit\` |
| Audit trail | the organization's records, filtered and paged | \`/api/v1/admin/audit\` |
| Eval schedules | schedules, runs, delete | \`/api/v1/llm/evals/schedules…\` |
| Tool servers | MCP servers, their tools and required roles, credentials by scope and date (never a secret); a server's id opens its access | \`/api/v1/mcp/servers…\`, \`/api/v1/authorization/llm/check\` |

Each page shows only what the signed-in key's permissions allow. The screenshots below are made by
\`pnpm console:screenshots\` (\`test/e2e/console-screenshots.ts\`), which starts the stack with a fake
provider, makes the data shown and photographs each page in Chromium at both sizes.

${body}`,
  );
  process.stdout.write(`wrote docs/console.md and ${shots.length * SIZES.length} screenshots\n`);
} finally {
  await upstream?.close();
  await s.close();
}

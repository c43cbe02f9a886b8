import { ROLES } from "@gw/core/authz";
import { ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { type McpServer, type ToolRole, toolNameProblem } from "@gw/core/mcp";
import { documentedAs, jsonSchemaOf } from "@gw/core/openapi";
import type { Principal } from "@gw/core/principal";
import { validate } from "@gw/core/validation";
import { z } from "zod";
import { serverFor } from "../../mcp/access.ts";
import { upstreamTools } from "../../mcp/catalogue.ts";
import type { McpDeps } from "../../mcp/deps.ts";
import { list, TAG, tool as toolSchema } from "./schemas.ts";

const policyFields = z.strictObject({
  required_role: z.enum(ROLES).optional(),
  disabled: z.boolean().optional(),
});

/**
 * `{"required_role"}` or `{"disabled"}`, one of them: one object, so that a
 * 422 names the field at fault (a union of two objects could only say the
 * body matched neither).
 */
export const toolPolicyBody = documentedAs(
  policyFields.superRefine((body, ctx) => {
    if (body.required_role !== undefined && body.disabled !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["disabled"],
        input: body.disabled,
        message: "Value error, send required_role or disabled, not both",
      });
    else if (body.required_role === undefined && body.disabled === undefined)
      ctx.addIssue({
        code: "custom",
        input: body,
        message: `Value error, send required_role (one of ${ROLES.map((r) => `'${r}'`).join(", ")}) or disabled (true or false)`,
      });
  }),
  () => ({
    ...jsonSchemaOf(policyFields),
    oneOf: [{ required: ["required_role"] }, { required: ["disabled"] }],
  }),
);

/**
 * Any name the tools' listing may show: what it takes is decided by
 * `toolNameProblem` with `MCP_MAX_TOOL_NAME_BYTES`, in the handler (the
 * limit is the deployment's), the one rule for what an upstream offers and
 * what a caller names.
 */
export const toolParams = z.object({
  id: z.string(),
  tool_name: z.string().meta({
    description:
      "A tool's name as `GET …/tools` lists it: no control character, well-formed Unicode, at most `MCP_MAX_TOOL_NAME_BYTES` (384) bytes as encoded in its SpiceDB id (422 at `path.tool_name` otherwise)",
  }),
});

/** One tool as its owner sees it. */
export interface ToolView {
  name: string;
  description: string | null;
  read_only_hint: boolean;
  required_role: "reader" | "writer" | "owner" | null;
  disabled: boolean;
  /** Whether the upstream offered it when last asked (a policy may name a tool it does not offer). */
  offered: boolean;
}

/** A tool's view: its role, and what the upstream says of it when it offers it (`tool`). */
const viewOf = (name: string, role: ToolRole | undefined, tool?: OfferedTool) =>
  ({
    name,
    description: tool?.description || null,
    read_only_hint: tool?.annotations?.readOnlyHint === true,
    required_role: role ?? null,
    disabled: role === null,
    offered: tool !== undefined,
  }) satisfies ToolView;

/**
 * Per-tool roles (owner): `PUT …/tools/{tool_name}` `{"required_role"}` or
 * `{"disabled":true}` (`{"disabled":false}` gives the tool back its
 * default), `GET …/tools` each tool with the role it needs.
 */
export const setToolPolicy = defineRoute({
  method: "PUT",
  path: "/api/v1/mcp/servers/:id/tools/:tool_name",
  operationId: "setMcpToolPolicy",
  summary: "Set the role a tool needs, or disable it (owner)",
  tag: TAG,
  permission: "mcp:write",
  params: toolParams,
  body: toolPolicyBody,
  // Validated once the owner role is known.
  bodyValidation: { byHandler: true },
  responses: { 200: { description: "The tool", schema: toolSchema } },
  // 502/504: `{"disabled":false}` asks the upstream for the tool's default.
  errors: ["not_found", "bad_gateway", "gateway_timeout"],
  handler: async ({ principal, params: { id, tool_name }, body: raw }, deps: McpDeps) => {
    const server = await serverFor(deps, principal, id, "owner", "set its tools' roles");
    const problem = toolNameProblem(tool_name, deps.limits.toolNameBytes);
    if (problem)
      throw new ValidationFailed([
        { loc: ["path", "tool_name"], msg: `Value error, ${problem}`, type: "value_error", input: tool_name },
      ]);
    const body = validate("body", toolPolicyBody, raw);
    let role: ToolRole;
    let tool: OfferedTool | undefined;
    if (body.required_role !== undefined || body.disabled) {
      role = body.required_role ?? null;
      // A role may be set on a tool the upstream does not offer, or while it cannot say: the answer then
      // says `offered: false`, as the list would.
      tool = (await offeredTools(deps, principal, server)).find((t) => t.name === tool_name);
    } else {
      // Back to its default, which only the upstream can say (502/504 when it cannot).
      tool = (await upstreamTools(deps, principal, server)).find((t) => t.name === tool_name);
      role = tool?.annotations?.readOnlyHint === true ? "reader" : "writer";
    }
    await deps.tools.setRole(principal, server.id, tool_name, role);
    return viewOf(tool_name, role, tool);
  },
});

type OfferedTool = Awaited<ReturnType<typeof upstreamTools>>[number];

/** The server's tools as its upstream offers them; none (logged) when it cannot say. */
const offeredTools = (deps: McpDeps, principal: Principal, server: McpServer) =>
  upstreamTools(deps, principal, server).catch((err: unknown): OfferedTool[] => {
    deps.logger.warn(
      { err: (err as Error).message, server: server.id },
      "could not list an MCP server's tools",
    );
    return [];
  });

export const listTools = defineRoute({
  method: "GET",
  path: "/api/v1/mcp/servers/:id/tools",
  operationId: "listMcpTools",
  summary: "Each tool of an MCP server with the role it needs (owner)",
  tag: TAG,
  permission: "mcp:read",
  responses: { 200: { description: "The tools", schema: list(toolSchema) } },
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: McpDeps) => {
    const server = await serverFor(deps, principal, String(params.id), "owner", "list its tools' roles");
    const offered = await offeredTools(deps, principal, server);
    const roles = await deps.tools.roles(principal.org, server.id);
    const names = [...new Set([...offered.map((t) => t.name), ...roles.keys()])].sort();
    const data = names.map((name) =>
      viewOf(
        name,
        roles.get(name),
        offered.find((t) => t.name === name),
      ),
    );
    return { object: "list", data };
  },
});

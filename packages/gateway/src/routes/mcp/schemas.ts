import { type JsonSchema, objectSchema, stringSchema } from "@gw/core/openapi";

export const TAG = "MCP Vault";

export const server: JsonSchema = objectSchema({
  id: stringSchema("`mcp_…`"),
  object: { const: "mcp.server" },
  name: stringSchema(),
  url: stringSchema(),
  description: { type: ["string", "null"] },
  created_at: { type: "integer", description: "Unix seconds" },
});

export const credential: JsonSchema = objectSchema(
  {
    scope: { enum: ["shared", "me"] },
    type: { enum: ["bearer", "header"] },
    name: stringSchema("The header's name (for `header`); never its value"),
    created_at: { type: "integer" },
    last_used_at: { type: ["integer", "null"] },
  },
  { optional: ["name"] },
);

export const tool: JsonSchema = objectSchema({
  name: stringSchema(),
  description: { type: ["string", "null"] },
  read_only_hint: { type: "boolean" },
  required_role: { enum: ["reader", "writer", "owner", null] },
  disabled: { type: "boolean" },
  offered: { type: "boolean" },
});

export const list = (items: JsonSchema): JsonSchema =>
  objectSchema({ object: { const: "list" }, data: { type: "array", items } }, { open: true });

export * from "./consistency-tokens.ts";
export * from "./expired-resources.ts";
export * from "./identity.ts";
export * from "./relationships.ts";
export * from "./resource-authorization.ts";
export * from "./spicedb-client.ts";
export * from "./spicedb-config.ts";
export * from "./writer-deletion.ts";

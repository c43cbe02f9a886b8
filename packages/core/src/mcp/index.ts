export * from "./bounded-body.ts";
export * from "./credentials.ts";
export * from "./guarded-fetch.ts";
export * from "./servers.ts";
export * from "./tool-authorization.ts";
export * from "./upstream-address.ts";
export * from "./upstream-client.ts";
export * from "./vault.ts";

export * from "./tool-authorization.ts";

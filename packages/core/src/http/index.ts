export * from "./common.ts";
export * from "./listen.ts";
export * from "./metrics-endpoint.ts";
export * from "./principal.ts";
export * from "./probes.ts";
export * from "./rate-limit-headers.ts";
export * from "./route.ts";
export * from "./route-labels.ts";

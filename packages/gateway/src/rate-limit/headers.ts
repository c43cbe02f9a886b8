export { policyHeader, rateLimitHeader, secondsUntil } from "@gw/core/http";

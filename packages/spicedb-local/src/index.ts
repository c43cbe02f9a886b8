export { spicedbLocalConfigSchema } from "./config.ts";
export { EngineError, SpiceDBEngine } from "./engine.ts";
export { type RecycleStats, type RunningSpiceDBLocal, startSpiceDBLocal } from "./server.ts";
export { runValidationFile, type ValidationReport } from "./validation-file.ts";

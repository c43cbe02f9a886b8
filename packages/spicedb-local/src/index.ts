export { spicedbLocalConfigSchema } from "./config.ts";
export { EngineError, SpiceDBEngine } from "./engine.ts";
export { type RunningSpiceDBLocal, startSpiceDBLocal } from "./server.ts";
export { runValidationFile, type ValidationReport } from "./validation-file.ts";

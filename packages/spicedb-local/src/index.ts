export { EngineError, SpiceDBEngine } from "./engine.ts";
export { DEFAULT_LOCAL_PRESHARED_KEY, type RunningSpiceDBLocal, startSpiceDBLocal } from "./server.ts";

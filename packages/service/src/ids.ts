import { randomBytes } from "node:crypto";

/** A new id the service issues: `<prefix>_` and 128 random bits in hex (`conv_…`, `resp_…`, `msg_…`, `call_…`). */
export const newId = (prefix: string) => `${prefix}_${randomBytes(16).toString("hex")}`;

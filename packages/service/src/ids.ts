import { randomBytes } from "node:crypto";

/** A new id the service issues: `<prefix>_` and 128 random bits in hex (`conv_…`, `resp_…`, `msg_…`, `call_…`). */
export const newId = (prefix: string) => `${prefix}_${randomBytes(16).toString("hex")}`;

/** A chat completion's id, as OpenAI spells them: `chatcmpl-` and 128 random bits in hex. */
export const newCompletionId = () => `chatcmpl-${randomBytes(16).toString("hex")}`;

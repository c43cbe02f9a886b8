import type { Stack } from "./stack.ts";

export const FILES = "/api/v1/llm/files";

export interface UploadInput {
  /** The file's bytes (text is UTF-8). */
  content: string | Uint8Array;
  filename?: string;
  /** The part's Content-Type. */
  type?: string;
  purpose?: string;
  /** More form fields (`expires_after[seconds]`…), in order after `purpose`. */
  fields?: Record<string, string>;
  user?: string;
}

/** `POST /files` as the OpenAI clients send it: a multipart form with `purpose` then `file`, through the gateway. */
export function upload(stack: Stack, secret: string, input: UploadInput): Promise<Response> {
  const form = new FormData();
  if (input.purpose !== undefined) form.append("purpose", input.purpose);
  for (const [name, value] of Object.entries(input.fields ?? {})) form.append(name, value);
  const bytes = typeof input.content === "string" ? new TextEncoder().encode(input.content) : input.content;
  form.append(
    "file",
    new Blob([bytes as Uint8Array<ArrayBuffer>], { type: input.type ?? "text/plain" }),
    input.filename ?? "notes.txt",
  );
  return fetch(`${stack.gatewayUrl}${FILES}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, ...(input.user ? { "x-on-behalf-of": input.user } : {}) },
    body: form,
  });
}

/** Uploads and answers the file object, failing the test on any other status. */
export async function uploaded(
  stack: Stack,
  secret: string,
  input: UploadInput,
): Promise<{
  id: string;
  bytes: number;
  filename: string;
  purpose: string;
  created_at: number;
  expires_at: number;
}> {
  const res = await upload(stack, secret, { purpose: "assistants", ...input });
  if (res.status !== 200) throw new Error(`upload: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A raw multipart body with `boundary`, from parts given as their header lines and body. */
export function multipartBody(
  boundary: string,
  parts: { headers: string[]; body: string | Buffer }[],
): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\n${part.headers.join("\r\n")}\r\n\r\n`));
    chunks.push(Buffer.isBuffer(part.body) ? part.body : Buffer.from(part.body));
    chunks.push(Buffer.from("\r\n"));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

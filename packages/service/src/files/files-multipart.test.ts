import { once } from "node:events";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { multipartBody } from "../../test/files.ts";
import { readForm } from "./multipart.ts";

const BOUNDARY = "form-boundary";

/** A request of `body` as busboy reads it: its headers and its bytes, ended. */
function request(body: Buffer): IncomingMessage {
  const req = Object.assign(new PassThrough(), {
    headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    complete: true,
  });
  req.end(body);
  return req as unknown as IncomingMessage;
}

const filePart = (name: string, body: string) => ({
  headers: [`Content-Disposition: form-data; name="file"; filename="${name}"`, "Content-Type: text/plain"],
  body,
});

describe("readForm", () => {
  it("fails a form only once the file part it was storing has stopped, so what it stored can be removed after its last write", async () => {
    const events: string[] = [];
    const storing = Promise.withResolvers<void>();
    // Two files: the second breaks the form's bound while the first is still being stored.
    const req = request(multipartBody(BOUNDARY, [filePart("a.txt", "one"), filePart("b.txt", "two")]));
    const form = readForm(req, "file", async (stream) => {
      stream.resume();
      await storing.promise;
      events.push("stored");
    }).then(
      () => events.push("form read"),
      (err: Error) => events.push(`form failed: ${err.message}`),
    );
    // The whole body has been parsed (the second file refused on the way); the first is still being stored.
    await once(req, "end");
    storing.resolve();
    await form;
    expect(events).toEqual([
      "stored",
      "form failed: body.file: Only one file is taken, in the part named file",
    ]);
  });
});

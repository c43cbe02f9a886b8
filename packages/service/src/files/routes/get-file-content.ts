import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { type FileRouteDeps, TAG } from "./deps.ts";

/**
 * `GET /api/v1/llm/files/{id}/content`: the file's bytes as uploaded, read
 * a piece at a time as the caller takes them; needs reader. Always a
 * download (`Content-Disposition: attachment`, `nosniff`), in the media
 * type the upload declared.
 */
export const getFileContent = defineRoute({
  method: "GET",
  path: "/api/v1/llm/files/:id/content",
  operationId: "getFileContent",
  summary: "A file's content (reader)",
  tag: TAG,
  permission: "files:read",
  responses: {
    200: {
      description:
        "The bytes, with the media type the upload declared (application/octet-stream when it declared none usable), `Content-Disposition: attachment` and `X-Content-Type-Options: nosniff`",
      schema: { type: "string", format: "binary" },
      // Whatever the upload declared: a range, so the document names no one type for every file.
      contentType: "*/*",
    },
  },
  errors: ["not_found"],
  authorize: roleOn("file", "reader"),
  handler: async ({ principal, params, res }, deps: FileRouteDeps) => {
    const found = await deps.files.get(principal.org, params.id!);
    if (!found) throw notFound(`No file ${params.id}`);
    // The first piece before any header: a store that fails now still gets the catalogue's answer; after
    // it, the answer is cut short of its Content-Length, which a client sees.
    const pieces = deps.files
      .content({ org: principal.org, id: found.id, bytes: found.bytes })
      [Symbol.asyncIterator]();
    const first = await pieces.next();
    // Express's attachment() encodes the name (RFC 6266, `filename*` beyond ASCII); the type is the stored one.
    res.attachment(found.filename);
    // setHeader, not Express's set, which would add a charset the upload never declared.
    res.setHeader("Content-Type", found.contentType);
    res.set({
      "Content-Length": String(found.bytes),
      "X-Content-Type-Options": "nosniff",
      "Cache-Control": "no-store",
    });
    // Bytes, not objects: a readable of objects would read up to 16 pieces ahead of a slow client.
    await pipeline(Readable.from(following(first, pieces), { objectMode: false }), res);
  },
});

/** The pieces of a read whose first was taken already: that one, then the rest. */
async function* following(
  first: IteratorResult<Buffer>,
  rest: AsyncIterator<Buffer>,
): AsyncGenerator<Buffer> {
  for (let next = first; !next.done; next = await rest.next()) yield next.value;
}

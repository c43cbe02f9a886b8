import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { AppError, ValidationFailed, type ValidationIssue } from "@gw/core/errors";
import busboy from "busboy";

/** Bounds of a form besides its one file: what a form of OpenAI's file upload needs, and some room. */
export const FORM_LIMITS = {
  /** Fields (not files) read at most. */
  fields: 8,
  /** Parts of any kind read at most. */
  parts: 10,
  /** Longest field value, in bytes. */
  fieldBytes: 1024,
  /** Longest field name, in bytes. */
  fieldNameBytes: 100,
  /** Header lines of a part. */
  headerPairs: 20,
} as const;

/** Bytes of a form around its file (boundaries, part headers, fields): a declared length past the file's limit by more is refused unread. */
export const FORM_OVERHEAD_BYTES = 64 * 1024;

/** What the form's one file part says of itself. */
export interface FilePart {
  filename: string | undefined;
  mimeType: string;
}

/** A form read whole: its fields, and what `store` made of its file part when there was one. */
export interface ReadForm<T> {
  fields: Record<string, string>;
  file?: { part: FilePart; stored: T };
}

const unreadable = (msg: string, loc: (string | number)[] = ["body"]) =>
  new ValidationFailed([{ loc, msg, type: "value_error" }]);

/** busboy's errors, as the catalogue tells a client (never busboy's own text). */
function formError(err: Error): AppError {
  if (/Unexpected end of (form|file)/.test(err.message))
    return unreadable("The multipart body ended before its closing boundary");
  if (/Malformed part header/.test(err.message))
    return unreadable("A part of the multipart body has a malformed header");
  return unreadable("The multipart body could not be read");
}

/**
 * Reads a `multipart/form-data` body with busboy as it arrives: fields are
 * collected (bounded by `FORM_LIMITS`), and the part named `fileField`, when
 * it is a file, goes to `store` as a stream at once, before the rest of the
 * form is read, so the file is never held whole. Resolves when the whole
 * form is read and `store` is done; rejects with a catalogue error
 * (`ValidationFailed` for a form that cannot be read or breaks a bound,
 * what `store` threw, a `bad_request` when the request ends early). Once it
 * fails it reads no more of the form: the rest of the request is discarded.
 */
export function readForm<T>(
  req: IncomingMessage,
  fileField: string,
  store: (stream: Readable, part: FilePart) => Promise<T>,
): Promise<ReadForm<T>> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        // Names as clients write them: UTF-8 (httpx and undici's FormData send raw UTF-8).
        defParamCharset: "utf8",
        limits: {
          fields: FORM_LIMITS.fields,
          parts: FORM_LIMITS.parts,
          files: 1,
          fieldSize: FORM_LIMITS.fieldBytes,
          fieldNameSize: FORM_LIMITS.fieldNameBytes,
          headerPairs: FORM_LIMITS.headerPairs,
        },
      });
    } catch {
      reject(unreadable("multipart/form-data needs a boundary parameter", ["header", "content-type"]));
      return;
    }
    const fields: Record<string, string> = {};
    const problems: ValidationIssue[] = [];
    let file: { part: FilePart; stored: Promise<T> } | undefined;
    let settled = false;

    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.unpipe(parser);
      parser.removeAllListeners();
      // busboy's own later errors have nowhere to go.
      parser.on("error", () => undefined);
      parser.destroy();
      // The rest of the request is read and dropped, so the answer reaches a client still sending.
      req.resume();
      // A part being stored stops too (its stream destroyed, or ended already): the form fails once it has
      // settled, so that what it stored is removed after its last write, never beside it.
      if (file) file.stored.then(stopped, stopped);
      else reject(err);
      function stopped() {
        reject(err);
      }
    };

    parser.on("file", (name, stream, info) => {
      if (name !== fileField || file) {
        // Another file part: drained, and named as a field the form does not take.
        stream.resume();
        fields[name] ??= "";
        return;
      }
      const part = { filename: info.filename, mimeType: info.mimeType };
      // The part's own failure (the form broken off inside it) is busboy's, told as such.
      let broken: unknown;
      stream.once("error", (err) => {
        broken = err;
      });
      file = { part, stored: store(stream, part) };
      file.stored.catch((err: unknown) => fail(err === broken ? formError(err as Error) : err));
    });
    parser.on("field", (name, value, info) => {
      if (info.nameTruncated)
        problems.push({ loc: ["body"], msg: "A field name is too long", type: "value_error" });
      else if (info.valueTruncated)
        problems.push({
          loc: ["body", name],
          msg: `String should have at most ${FORM_LIMITS.fieldBytes} bytes`,
          type: "string_too_long",
        });
      else if (Object.hasOwn(fields, name))
        problems.push({ loc: ["body", name], msg: "The field is given more than once", type: "value_error" });
      else fields[name] = value;
    });
    const tooMany = (what: string) => () =>
      fail(
        what === "files"
          ? unreadable("Only one file is taken, in the part named file", ["body", fileField])
          : unreadable(
              `The form has more ${what} than the ${FORM_LIMITS[what as "fields" | "parts"]} it may have`,
            ),
      );
    parser.on("filesLimit", tooMany("files"));
    parser.on("fieldsLimit", tooMany("fields"));
    parser.on("partsLimit", tooMany("parts"));
    parser.on("error", (err: Error) => fail(formError(err)));
    parser.on("close", () => {
      if (settled) return;
      const done = file;
      const finish = (stored?: T) => {
        if (settled) return;
        settled = true;
        if (problems.length > 0) reject(new ValidationFailed(problems));
        else resolve({ fields, ...(done ? { file: { part: done.part, stored: stored as T } } : {}) });
      };
      if (done) done.stored.then(finish, fail);
      else finish();
    });
    // A client that goes away mid-form: nobody to answer, but what was stored must go.
    req.on("close", () => {
      if (!req.complete) fail(new AppError("bad_request", "The request ended before its body did"));
    });
    req.pipe(parser);
  });
}

import type { IncomingMessage } from "node:http";
import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError, ValidationFailed, type ValidationIssue } from "@gw/core/errors";
import { documentedAs } from "@gw/core/openapi";
import type { Principal } from "@gw/core/principal";
import { validate } from "@gw/core/validation";
import { z } from "zod";
import type { Ids } from "../ids.ts";
import type { FileRef } from "./contents.ts";
import type { Files, StagedUpload } from "./files.ts";
import { FORM_OVERHEAD_BYTES, readForm } from "./multipart.ts";
import { FILE_PURPOSES, type FileObject } from "./store.ts";

/** `expires_after[seconds]`: from a minute to 30 days. */
export const EXPIRES_AFTER_SECONDS = { min: 60, max: 2_592_000 } as const;
/** Longest file name kept, in characters. */
export const MAX_FILENAME_CHARS = 255;

/** Whole numbers as a form sends them (strings), anything else failing as itself. */
const formInt = (min: number, max: number) =>
  z.preprocess(
    (v) => (typeof v === "string" && /^[+-]?\d{1,12}$/.test(v) ? Number(v) : v),
    z.int().min(min).max(max),
  );

/**
 * The form of `POST /files`, as OpenAI's `CreateFileRequest` has it and
 * openai-python and openai-node send it (`expires_after` as bracketed
 * fields). `file` stands for the file part, which is read as it arrives,
 * never as a value.
 */
export const uploadForm = z
  .strictObject({
    file: documentedAs(z.literal(true), () => ({
      type: "string",
      format: "binary",
      description: `The file: a part with a file name (1 to ${MAX_FILENAME_CHARS} characters); its Content-Type is served back with it`,
    })),
    purpose: z.enum(FILE_PURPOSES),
    "expires_after[anchor]": z.literal("created_at").optional(),
    "expires_after[seconds]": formInt(EXPIRES_AFTER_SECONDS.min, EXPIRES_AFTER_SECONDS.max).optional(),
  })
  .superRefine((form, ctx) => {
    const anchor = form["expires_after[anchor]"] !== undefined;
    const seconds = form["expires_after[seconds]"] !== undefined;
    if (anchor !== seconds)
      ctx.addIssue({
        code: "invalid_type",
        expected: anchor ? "int" : "string",
        path: [anchor ? "expires_after[seconds]" : "expires_after[anchor]"],
        message: "Field required",
        input: undefined,
      });
  });

/** A media type as served back: `type/subtype` of token characters, else `application/octet-stream`. */
export function servedContentType(declared: string): string {
  return /^[a-z0-9!#$&^_.+-]{1,63}\/[a-z0-9!#$&^_.+-]{1,63}$/i.test(declared)
    ? declared.toLowerCase()
    : "application/octet-stream";
}

function filenameProblem(filename: string | undefined): ValidationIssue | undefined {
  const chars = [...(filename ?? "")].length;
  // Control characters would be sent back in Content-Disposition; PostgreSQL cannot hold U+0000.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the characters refused
  if (chars >= 1 && chars <= MAX_FILENAME_CHARS && !/[\u0000-\u001f\u007f]/.test(filename!)) return undefined;
  return {
    loc: ["body", "file"],
    msg: `The file needs a name of 1 to ${MAX_FILENAME_CHARS} characters, without control characters`,
    type: "value_error",
  };
}

export interface UploadDeps {
  files: Files;
  authorization: ResourceAuthorization;
  ids: Ids;
}

/**
 * Receives a file upload (`multipart/form-data`): the file part is stored
 * while it arrives (`Files.stage`: its record invisible, each piece charged
 * to the organization's quota and written), then the form is validated, the
 * principal is made the file's owner in SpiceDB (until the file expires),
 * and the upload becomes the file. Whatever fails on the way (a form that
 * cannot be read or is invalid, a file too large or empty, the quota, the
 * owner's write, a client gone) removes what was stored; if the file cannot
 * become visible after its owner was written, the ownership is given back
 * too, as a conversation's create does.
 */
export async function receiveUpload(
  deps: UploadDeps,
  principal: Principal,
  req: IncomingMessage,
): Promise<FileObject> {
  // The media type alone, whatever its case and parameters (the boundary is busboy's to read).
  if (!/^multipart\/form-data\s*(;|$)/i.test(req.headers["content-type"] ?? ""))
    throw new AppError("unsupported_media_type", "Files are uploaded as multipart/form-data");
  const declared = Number(req.headers["content-length"]);
  // Refused unread: the form is larger than the largest file and its fields together.
  if (declared > deps.files.maxBytes + FORM_OVERHEAD_BYTES) {
    req.resume();
    throw new AppError(
      "file_too_large",
      `The file is larger than the ${deps.files.maxBytes} bytes a file may have`,
      {
        param: "file",
      },
    );
  }
  const ref: FileRef = { org: principal.org, id: deps.ids.newId("file") };
  let begun = false;
  try {
    const form = await readForm(req, "file", async (stream, part) => {
      const problem = filenameProblem(part.filename);
      if (problem) throw new ValidationFailed([problem]);
      begun = true;
      return deps.files.stage(
        { ...ref, filename: part.filename!, contentType: servedContentType(part.mimeType) },
        stream,
      );
    });
    const staged = form.file?.stored;
    const fields = validFields(form.fields, staged);
    const expiresAt = new Date(
      staged!.createdAt.getTime() +
        (fields["expires_after[seconds]"] !== undefined
          ? fields["expires_after[seconds]"] * 1000
          : deps.files.retentionMs),
    );
    const resource = { type: "file" as const, id: ref.id };
    await deps.authorization.createOwnership(principal, resource, { expiresAt });
    try {
      const file = await deps.files.complete(ref, { purpose: fields.purpose, expiresAt });
      if (!file)
        throw new AppError(
          "service_unavailable",
          "The upload was removed before it completed; upload it again",
        );
      const { contentType: _type, ...object } = file;
      return object;
    } catch (err) {
      // Not visible: its id must keep no owner relationship (if this fails too, the orphan reconciler removes it).
      await deps.authorization.deleteResource(principal, resource).catch(() => undefined);
      throw err;
    }
  } catch (err) {
    if (begun) await deps.files.discard(ref);
    throw err;
  }
}

/** The form's fields, validated, with the file part's presence (an empty file is refused here). */
function validFields(fields: Record<string, string>, staged: StagedUpload | undefined) {
  const problems: ValidationIssue[] = [];
  const { file: text, ...rest } = fields;
  if (text !== undefined)
    problems.push({
      loc: ["body", "file"],
      msg: "file must be a file part (with a filename), not a text field",
      type: "value_error",
    });
  else if (staged?.bytes === 0)
    problems.push({ loc: ["body", "file"], msg: "The file is empty", type: "value_error" });
  let parsed: z.output<typeof uploadForm> | undefined;
  try {
    parsed = validate("body", uploadForm, {
      ...rest,
      ...(staged && text === undefined ? { file: true } : {}),
    });
  } catch (err) {
    if (!(err instanceof ValidationFailed)) throw err;
    // The text `file` is told above; not again as missing.
    problems.push(...err.issues.filter((i) => !(text !== undefined && i.loc[1] === "file")));
  }
  if (problems.length > 0 || !parsed) throw new ValidationFailed(problems);
  return parsed;
}

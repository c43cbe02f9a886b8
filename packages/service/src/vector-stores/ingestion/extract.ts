import { extname } from "node:path";
import type { FileError } from "../store.ts";

/** A file this ingestion cannot take, or whose content is broken: the file's `last_error`, never retried. */
export class FileRejected extends Error {
  readonly code: FileError["code"];

  constructor(code: FileError["code"], message: string) {
    super(message);
    this.name = "FileRejected";
    this.code = code;
  }
}

/** Extensions read as text as they are: plain text, Markdown, JSON and source code. */
const TEXT_EXTENSIONS = new Set([
  ".txt",
  ".text",
  ".md",
  ".markdown",
  ".mdx",
  ".rst",
  ".json",
  ".jsonl",
  ".csv",
  ".tsv",
  ".log",
  ".yaml",
  ".yml",
  ".toml",
  ".ini",
  ".xml",
  ".tex",
  ".c",
  ".h",
  ".cc",
  ".cpp",
  ".hpp",
  ".cs",
  ".css",
  ".go",
  ".java",
  ".kt",
  ".scala",
  ".js",
  ".mjs",
  ".cjs",
  ".jsx",
  ".ts",
  ".tsx",
  ".php",
  ".py",
  ".rb",
  ".rs",
  ".sh",
  ".bash",
  ".sql",
  ".swift",
  ".lua",
  ".r",
  ".pl",
  ".dart",
  ".vue",
  ".svelte",
]);
const HTML_EXTENSIONS = new Set([".html", ".htm", ".xhtml"]);

export type TextKind = "text" | "html" | "pdf";

/** How a file is read, by its name's extension, else its declared media type; `undefined`: not taken. */
export function kindOf(filename: string, contentType: string): TextKind | undefined {
  const ext = extname(filename).toLowerCase();
  if (ext === ".pdf") return "pdf";
  if (HTML_EXTENSIONS.has(ext)) return "html";
  if (TEXT_EXTENSIONS.has(ext)) return "text";
  const type = contentType.toLowerCase().split(";")[0]!.trim();
  if (type === "application/pdf") return "pdf";
  if (type === "text/html" || type === "application/xhtml+xml") return "html";
  if (type.startsWith("text/") || type === "application/json" || type.endsWith("+json")) return "text";
  return undefined;
}

/** UTF-8 text (a byte-order mark dropped); `invalid_file` when the bytes are not UTF-8. */
function utf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new FileRejected("invalid_file", "The file is not valid UTF-8 text");
  }
}

const ENTITIES: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: " ",
};

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,8});/gi, (whole, name: string) => {
    if (name[0] === "#") {
      const code =
        name[1] === "x" || name[1] === "X" ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
      return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff)
        ? String.fromCodePoint(code)
        : "";
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/** Elements whose content is not text a reader sees. */
const SKIPPED = ["script", "style", "noscript", "template", "svg", "head"];
/** Elements that end a line of text. */
const BLOCK =
  /^(p|div|br|li|ul|ol|h[1-6]|tr|table|section|article|header|footer|blockquote|pre|hr|dt|dd|title)$/i;

/**
 * The text of an HTML document: tags dropped (block elements end a line),
 * scripts, styles and comments left out, entities decoded. One pass over
 * the text with `indexOf`, so its time is linear whatever the markup (an
 * unclosed comment or script ends the text).
 */
export function htmlText(html: string): string {
  const out: string[] = [];
  let at = 0;
  const lower = html.toLowerCase();
  while (at < html.length) {
    const open = html.indexOf("<", at);
    if (open === -1) {
      out.push(html.slice(at));
      break;
    }
    out.push(html.slice(at, open));
    if (html.startsWith("<!--", open)) {
      const end = html.indexOf("-->", open + 4);
      at = end === -1 ? html.length : end + 3;
      continue;
    }
    const close = html.indexOf(">", open + 1);
    if (close === -1) break;
    const name = /^<\/?\s*([a-z][a-z0-9-]*)/i.exec(html.slice(open, Math.min(close + 1, open + 40)))?.[1];
    at = close + 1;
    if (!name) continue;
    const lowered = name.toLowerCase();
    if (html[open + 1] !== "/" && SKIPPED.includes(lowered) && html[close - 1] !== "/") {
      const end = lower.indexOf(`</${lowered}`, at);
      if (end === -1) break;
      const endClose = html.indexOf(">", end);
      at = endClose === -1 ? html.length : endClose + 1;
      continue;
    }
    if (BLOCK.test(lowered)) out.push("\n");
  }
  return decodeEntities(out.join(""))
    .replace(/[ \t\f\r]+/g, " ")
    .replace(/ ?\n[\n ]*/g, "\n\n")
    .trim();
}

/** The text of a PDF's pages, one after another (pdf.js through `unpdf`); `invalid_file` when it cannot be read. */
async function pdfText(bytes: Uint8Array): Promise<string> {
  const { extractText, getDocumentProxy } = await import("unpdf");
  try {
    // pdf.js takes the buffer: a copy, so the caller's bytes stay as they are.
    const document = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    try {
      const { text } = await extractText(document, { mergePages: false });
      return text.join("\n\n");
    } finally {
      await document.loadingTask.destroy();
    }
  } catch {
    throw new FileRejected("invalid_file", "The PDF could not be read");
  }
}

/**
 * The text of a file to index, by its kind (`kindOf`): plain text, Markdown,
 * JSON and source code as they are, HTML without its markup, a PDF's pages'
 * text. `unsupported_file` for another kind, `invalid_file` for content that
 * does not parse. U+0000, which PostgreSQL cannot hold, is dropped.
 */
export async function extractText(bytes: Uint8Array, filename: string, contentType: string): Promise<string> {
  const kind = kindOf(filename, contentType);
  if (!kind)
    throw new FileRejected(
      "unsupported_file",
      "Vector stores take plain text, Markdown, JSON, source code, HTML and PDF files",
    );
  const text = kind === "pdf" ? await pdfText(bytes) : kind === "html" ? htmlText(utf8(bytes)) : utf8(bytes);
  return text.replaceAll("\u0000", "");
}

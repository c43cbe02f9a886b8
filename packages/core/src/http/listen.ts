import { randomUUID } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  maxHeaderSize,
  type Server,
  type ServerOptions,
  type ServerResponse,
  STATUS_CODES,
} from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { Express } from "express";
import { AppError, errorBody, isOpenAISurface } from "../errors.ts";

/** How long a connection refused at the HTTP level may stay half-closed before it is cut. */
const CLIENT_ERROR_LINGER_MS = 2_000;

/**
 * Starts listening and resolves with the server and the port it got (useful with port 0).
 * `options` are Node's server options (timeouts, header size), for tests and tuning.
 */
export function listen(
  app: Express,
  port: number,
  host: string,
  options: ServerOptions = {},
): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer(options, app);
    server.on("clientError", answerClientError(options.maxHeaderSize ?? maxHeaderSize));
    server.on("checkExpectation", refuseExpectation);
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve({ server, port: (server.address() as AddressInfo).port });
    });
  });
}

/**
 * Node refuses some requests before Express sees them (headers too large, a
 * request too slow to arrive, a malformed request line) and would answer with
 * a bare status line. These get the catalogue's JSON body instead, written to
 * the socket as Node's own answer would be, unless a response on this
 * connection has already begun.
 */
function answerClientError(headerLimit: number) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const error = clientError(err.code, headerLimit);
    const body = JSON.stringify(errorBody(error));
    socket.end(
      [
        `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}`,
        "Content-Type: application/json; charset=utf-8",
        `Content-Length: ${Buffer.byteLength(body)}`,
        `X-Request-Id: ${randomUUID()}`,
        "Connection: close",
        "",
        body,
      ].join("\r\n"),
    );
    setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
  };
}

/**
 * An `Expect` header other than `100-continue`: Node would answer a bare 417.
 * The catalogue's JSON instead (OpenAI's shape on `/api/v1/llm`), and the
 * connection closes, as the body the client holds back is never read.
 */
function refuseExpectation(req: IncomingMessage, res: ServerResponse): void {
  const error = new AppError(
    "expectation_failed",
    "Only 'Expect: 100-continue' is supported; send the request without this Expect header",
  );
  const body = JSON.stringify(errorBody(error, { openai: isOpenAISurface(req.url ?? "") }));
  res.writeHead(error.status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    "X-Request-Id": randomUUID(),
    Connection: "close",
  });
  res.end(body);
}

function clientError(code: string | undefined, headerLimit: number): AppError {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return new AppError(
        "request_header_fields_too_large",
        `The request line and headers exceed ${headerLimit} bytes`,
      );
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return new AppError("payload_too_large", "Chunk extensions are too large");
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new AppError("request_timeout", "The request did not arrive in time");
    default:
      return new AppError("bad_request", "Malformed HTTP request");
  }
}

/** Stops accepting connections, lets in-flight requests finish for up to `graceMs`, then cuts the rest. */
export function closeGracefully(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs).unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

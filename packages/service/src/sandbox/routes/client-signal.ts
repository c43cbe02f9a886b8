import { AppError } from "@gw/core/errors";
import type { Response } from "express";

/** The caller went away before its answer; only logs and metrics see this. */
export class RequestCancelled extends AppError {
  constructor() {
    super("bad_request", "The request was cancelled by the caller", { reason: "request_cancelled" });
    this.name = "RequestCancelled";
  }
}

/**
 * Aborts (with `RequestCancelled` as the reason) when the caller goes away
 * before its answer is sent, so the git work it started stops.
 */
export function clientSignal(res: Response): AbortSignal {
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort(new RequestCancelled());
  });
  return controller.signal;
}

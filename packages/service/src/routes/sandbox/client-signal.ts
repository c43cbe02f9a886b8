import type { Response } from "express";

/** Aborts when the caller goes away before its answer is sent, so the git work it started stops. */
export function clientSignal(res: Response): AbortSignal {
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

import type { RedisClient } from "@gw/core/redis";
import type { Response } from "express";
import { abortOnClose, eventSinkOf } from "../../http/model-call.ts";
import type { BackgroundResponses } from "../background/index.ts";

/** Streams a background response's events after `after` (-1: all) to `res`, until they end or the caller goes away. */
export async function streamEvents(
  background: BackgroundResponses,
  responseId: string,
  after: number,
  res: Response,
): Promise<void> {
  const sink = eventSinkOf(res);
  const signal = abortOnClose(res);
  let reader: RedisClient | undefined;
  const blocking = () => {
    reader = background.reader();
    return reader;
  };
  try {
    sink.open();
    for await (const event of background.events.read(responseId, after, signal, blocking)) sink.write(event);
  } finally {
    reader?.disconnect();
    if (!sink.ended) sink.end();
  }
}

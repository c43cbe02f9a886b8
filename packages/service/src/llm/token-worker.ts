/**
 * A worker thread of the token-counting pool (`token-pool.ts`): counts the
 * texts it is sent, one job at a time, and answers with their tokens.
 */
import { parentPort } from "node:worker_threads";
import { countAllNow, type Tokenizer } from "./token-count.ts";

export interface CountJob {
  id: number;
  tokenizer: Tokenizer;
  texts: string[];
}

export type CountAnswer = { id: number; tokens: number } | { id: number; error: string };

parentPort!.on("message", ({ id, tokenizer, texts }: CountJob) => {
  let answer: CountAnswer;
  try {
    answer = { id, tokens: countAllNow(tokenizer, texts) };
  } catch (err) {
    answer = { id, error: (err as Error).message };
  }
  parentPort!.postMessage(answer);
});

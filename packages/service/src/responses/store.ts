import type { Redis } from "ioredis";
import type { Usage } from "../llm/provider.ts";

/** The response object (spec 2.6) with the fields this service adds. */
export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: "in_progress" | "completed";
  model: string;
  output: {
    type: "message";
    id: string;
    status: "in_progress" | "completed";
    role: "assistant";
    content: { type: "output_text"; text: string; annotations: unknown[] }[];
  }[];
  usage: Usage | null;
  instructions: string | null;
  max_output_tokens: number | null;
  conversation: { id: string } | null;
  metadata: Record<string, string>;
}

const key = (org: string, id: string) => `gw:resp:{${org}}:${id}`;

export class ResponseStore {
  private readonly redis: Redis;

  constructor(redis: Redis) {
    this.redis = redis;
  }

  async save(org: string, response: ResponseObject): Promise<void> {
    await this.redis.set(key(org, response.id), JSON.stringify(response));
  }

  async get(org: string, id: string): Promise<ResponseObject | undefined> {
    const json = await this.redis.get(key(org, id));
    return json ? (JSON.parse(json) as ResponseObject) : undefined;
  }
}

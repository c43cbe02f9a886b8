import { cancelResponse } from "./cancel-response.ts";
import { countInputTokens } from "./count-input-tokens.ts";
import { createResponse } from "./create-response.ts";
import { deleteResponse } from "./delete-response.ts";
import { getResponse } from "./get-response.ts";
import { listInputItems } from "./list-input-items.ts";

/** Every `/api/v1/llm/responses` route. */
export const responseRoutes = [
  createResponse,
  countInputTokens,
  getResponse,
  listInputItems,
  deleteResponse,
  cancelResponse,
];

import { createCompletion } from "./create-completion.ts";
import { deleteCompletion } from "./delete-completion.ts";
import { getCompletion } from "./get-completion.ts";
import { listCompletionMessages } from "./list-completion-messages.ts";
import { listCompletions } from "./list-completions.ts";
import { updateCompletion } from "./update-completion.ts";

/** Every `/api/v1/llm/chat/completions` route (deprecated, as the contract says). */
export const completionRoutes = [
  createCompletion,
  listCompletions,
  getCompletion,
  listCompletionMessages,
  updateCompletion,
  deleteCompletion,
];

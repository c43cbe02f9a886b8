import { getModel } from "./get-model.ts";
import { listModels } from "./list-models.ts";

/** The `/api/v1/llm/models` routes: the models a key may use. */
export const modelRoutes = [listModels, getModel];

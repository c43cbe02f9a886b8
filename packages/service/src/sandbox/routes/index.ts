import { createSession } from "./create-session.ts";
import { deleteConnection } from "./delete-connection.ts";
import { deleteSession } from "./delete-session.ts";
import { getConnection } from "./get-connection.ts";
import { getSession } from "./get-session.ts";
import { push } from "./push.ts";
import { putConnection } from "./put-connection.ts";
import { startAssignment } from "./start-assignment.ts";

/** Every `/api/v1/sandbox` route: the caller's stored connection, its sessions, and pushing them. */
export const sandboxRoutes = [
  putConnection,
  getConnection,
  deleteConnection,
  createSession,
  getSession,
  deleteSession,
  startAssignment,
  push,
];

import type { Router } from "express";
import type { Sandbox } from "../../sandbox/sandbox.ts";
import { registerCreateSession } from "./create-session.ts";
import { registerDeleteConnection } from "./delete-connection.ts";
import { registerDeleteSession } from "./delete-session.ts";
import { registerGetConnection } from "./get-connection.ts";
import { registerGetSession } from "./get-session.ts";
import { registerPush } from "./push.ts";
import { registerPutConnection } from "./put-connection.ts";
import { registerStartAssignment } from "./start-assignment.ts";

/** Every `/api/v1/sandbox` route: the caller's stored connection, its sessions, and pushing them. */
export function registerSandboxRoutes(router: Router, sandbox: Sandbox): void {
  registerPutConnection(router, sandbox.connections);
  registerGetConnection(router, sandbox.connections);
  registerDeleteConnection(router, sandbox.connections);
  registerCreateSession(router, sandbox);
  registerGetSession(router, sandbox.sessions);
  registerDeleteSession(router, sandbox);
  registerStartAssignment(router, sandbox.sessions);
  registerPush(router, sandbox);
}

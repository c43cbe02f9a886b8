import { principalOf } from "@gw/core/http";
import type { Principal } from "@gw/core/principal";
import type { Router } from "express";

export type WhoamiResponse = Principal;

/** `GET /api/v1/authentication/whoami`: the principal this request acts as (no secrets). Any valid credential may ask. */
export function registerWhoami(router: Router): void {
  router.get("/authentication/whoami", (_req, res) => {
    const body: WhoamiResponse = principalOf(res);
    res.json(body);
  });
}

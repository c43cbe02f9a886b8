import { z } from "zod";
import type { Git } from "../git.ts";

/** A branch name as `git check-ref-format --branch` judges it (so never one starting with `-`). */
export const branchName = (git: Pick<Git, "isValidBranchName">, field: string) =>
  z
    .string()
    .min(1, { abort: true })
    .max(255, { abort: true })
    .superRefine(async (name, ctx) => {
      if (!(await git.isValidBranchName(name))) {
        ctx.addIssue({
          code: "custom",
          input: name,
          message: `Value error, '${name}' is not a valid ${field} name (git check-ref-format --branch refuses it)`,
        });
      }
    });

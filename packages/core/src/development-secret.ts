import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "./logger.ts";

/**
 * A secret the operator did not configure: for development, 256 random bits
 * (base64url) kept in `file` (mode 0600), so restarts and sibling processes
 * sharing the data directory use the same one. Logged as such, naming the
 * `variable` production must set.
 */
export async function developmentSecret(
  file: string,
  logger: Logger,
  purpose: string,
  variable: string,
): Promise<string> {
  let secret = await readFile(file, "utf8").then(
    (t) => t.trim(),
    () => "",
  );
  if (!secret) {
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const fresh = randomBytes(32).toString("base64url");
    try {
      // Exclusive create: when several processes start together, one secret wins and all use it.
      await writeFile(file, fresh, { mode: 0o600, flag: "wx" });
      secret = fresh;
    } catch {
      for (let i = 0; i < 50 && !secret; i++) {
        secret = (await readFile(file, "utf8")).trim();
        if (!secret) await new Promise((r) => setTimeout(r, 20));
      }
      if (!secret) throw new Error(`${file} is empty`);
    }
  }
  logger.warn(
    { file },
    `${purpose}: using a development secret kept on local disk; production must set ${variable}`,
  );
  return secret;
}

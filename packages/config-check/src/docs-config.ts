/** `pnpm docs:config`: writes docs/configuration.md from the configuration schemas. */
import { CONFIGURATION_DOC, writeConfigurationDoc } from "./config-docs.ts";
import { CONFIG_SECTIONS } from "./config-sections.ts";

const missing = await writeConfigurationDoc(CONFIG_SECTIONS);
for (const problem of missing) process.stderr.write(`${problem}\n`);
process.stdout.write(`${CONFIGURATION_DOC}: written\n`);
process.exitCode = missing.length === 0 ? 0 : 1;

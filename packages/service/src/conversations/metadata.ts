import { z } from "zod";

/** Up to 16 string pairs, keys up to 64 characters, values up to 512. */
export const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, "Metadata should have at most 16 pairs");

import { crc32 } from "node:zlib";

/** Bytes before each payload: its length and its CRC-32, both unsigned 32-bit big-endian. */
const HEADER_BYTES = 8;

/** One record of a journal or snapshot file: `[length][crc32][payload]`. */
export function frame(payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.writeUInt32BE(crc32(payload), 4);
  out.set(payload, HEADER_BYTES);
  return out;
}

export interface FrameScan {
  payloads: Buffer[];
  /** Bytes of whole, intact frames from the start. */
  validBytes: number;
  /**
   * Why reading stopped before the end: `truncated` when the file ends inside
   * a frame (a write cut short, as by kill -9), `corrupt` when a whole frame
   * fails its checksum.
   */
  problem?: "truncated" | "corrupt";
}

/** Reads frames up to the end of `data` or the first one that is cut short or damaged. */
export function readFrames(data: Buffer): FrameScan {
  const payloads: Buffer[] = [];
  let offset = 0;
  while (offset < data.length) {
    if (data.length - offset < HEADER_BYTES) return { payloads, validBytes: offset, problem: "truncated" };
    const length = data.readUInt32BE(offset);
    const end = offset + HEADER_BYTES + length;
    if (end > data.length) return { payloads, validBytes: offset, problem: "truncated" };
    const payload = data.subarray(offset + HEADER_BYTES, end);
    if (crc32(payload) !== data.readUInt32BE(offset + 4))
      return { payloads, validBytes: offset, problem: "corrupt" };
    payloads.push(payload);
    offset = end;
  }
  return { payloads, validBytes: offset };
}

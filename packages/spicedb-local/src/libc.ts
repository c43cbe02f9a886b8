import koffi from "koffi";

let loaded: ReturnType<typeof koffi.load> | undefined;

/** glibc, for the few calls made to it directly (Linux only). */
export function libc(): ReturnType<typeof koffi.load> {
  loaded ??= koffi.load("libc.so.6");
  return loaded;
}

/**
 * Where the local SpiceDB of `pnpm start` and the tests listens, and its key: constants alone, so
 * what needs only them (`pnpm start`'s planning of ports, the local server's settings) loads no gRPC.
 */

/** Port of the local SpiceDB server (`packages/spicedb-local`) unless `SPICEDB_LOCAL_PORT` says otherwise. */
export const DEFAULT_LOCAL_SPICEDB_PORT = 50051;
/** Preshared key of the local SpiceDB server unless `SPICEDB_PRESHARED_KEY` says otherwise; it listens on loopback only. */
export const DEFAULT_LOCAL_PRESHARED_KEY = "spicedb-local-dev-key";

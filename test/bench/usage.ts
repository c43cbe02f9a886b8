/**
 * `pnpm bench --help` (or `-h`): prints what the benchmark does and the
 * variables that shape it, and exits before anything starts. Imported first
 * by `run.ts`, so it runs before any other module of the benchmark.
 */
export const USAGE = `Usage: pnpm bench

Measures the gateway on this machine, side by side in one run, and writes the
report to BENCHMARKS.md (about ten minutes on an idle 2-core machine; nothing is
asserted). It starts what it needs itself: Redis, the local SpiceDB, PostgreSQL,
gateway processes and a bare Express app. See docs/testing.md, "Benchmarks".

Environment:
  BENCH_ONLY=gateway         the HTTP benchmarks alone
  BENCH_ONLY=model           the model calls beside the provider called directly, alone
  BENCH_ONLY=routing         the routing decision, and (with BENCH_BASELINE) one deployment beside the code before, alone
  BENCH_BASELINE=<git rev>   the code the routing benchmark compares one deployment with (unset: that part skipped)
  BENCH_ONLY=cache           a response-cache hit's added p50 beside the provider called directly, alone
  BENCH_ONLY=growth          the growth run alone
  BENCH_ONLY=victim          a victim key's p50 beside twenty 1 MB calls of another, alone
  BENCH_ONLY=vectors         vector search with the permission filter over 100,000 chunks, alone
  BENCH_ONLY=ingestion       vector-store ingestion throughput (chunks a second, the provider's time excluded), alone
  BENCH_ONLY=guardrails      the guardrail checks (10,000 banned entries over 100 KB; the default checks over 4 KB), alone
  BENCH_ONLY=background      background responses: queued to completed a second, a resumed stream's first event, alone
  BENCH_GUARDRAIL_RUNS       runs of each guardrail measurement (default 200)
  BENCH_OUTPUT=<file>        write the report there instead of BENCHMARKS.md
  BENCH_ROUNDS               rounds of each HTTP comparison
  BENCH_ROUND_SECONDS        seconds of each round
  BENCH_MS                   milliseconds of each micro-benchmark (default 2000)
  BENCH_SPICEDB_SIZES        relationships for the SpiceDB start (default 10000,100000)
  BENCH_CHECK_SIZES          relationships for the check benchmarks (default 1000,100000)
  BENCH_MIX_SECONDS          seconds of the read/grant mix
  BENCH_MIX_WARMUP_SECONDS   seconds of its warm-up
  BENCH_CONTENT_RESPONSES    stored responses in the content benchmark (default 10000)
  BENCH_MODEL_CALLS          calls per row of the model-call table at concurrency 1 (default 300)
  BENCH_MODEL_SECONDS        seconds of each load at 16 connections (default 5)
  BENCH_MODEL_PROFILE_SECONDS seconds of load under the CPU profiler (default 10)
  BENCH_CACHE_CALLS          calls per row of the response-cache table (default 300)
  BENCH_VICTIM_CALLS         victim calls of each kind per round (default 40)
  BENCH_VICTIM_ROUNDS        rounds of the victim benchmark per attack (default 2)
  BENCH_BACKGROUND_RESPONSES background responses created at once (default 400)
  BENCH_BACKGROUND_RESUMES   resumed streams timed (default 200)
  BENCH_GROWTH_SIZES         stored responses of the growth run (default 1000,10000,100000)
  BENCH_GROWTH_ZEDTOKEN_TTL  SPICEDB_ZEDTOKEN_TTL of the growth run (default 90s), waited out after the last creation
  BENCH_VECTOR_CHUNKS        chunks of the vector search (default 100000)
  BENCH_VECTOR_FILES         files they are in (default 1000)
  BENCH_VECTOR_DIMENSIONS    width of their embeddings (default 256)
  BENCH_VECTOR_SEARCHES      searches of each kind (default 200)
  BENCH_INGEST_FILES         files of about 20 KB the ingestion benchmark ingests (default 200)

A reduced run (about four minutes):
  BENCH_ONLY=gateway BENCH_ROUNDS=1 BENCH_ROUND_SECONDS=1 BENCH_CHECK_SIZES=1000,10000 \\
  BENCH_MIX_SECONDS=5 BENCH_OUTPUT=/tmp/bench.md pnpm bench
`;

if (process.argv.slice(2).some((arg) => arg === "--help" || arg === "-h")) {
  process.stdout.write(USAGE);
  process.exit(0);
}

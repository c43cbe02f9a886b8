/**
 * Asserts that a response is a catalogue error: `status`, a JSON body, and
 * nothing of a stack trace or another system's internals in it. Returns the body.
 */
export async function expectJsonError(res: Response, status: number): Promise<Record<string, unknown>> {
  const { expect } = await import("vitest");
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  const body = (await res.json()) as Record<string, unknown>;
  expect(JSON.stringify(body)).not.toMatch(/RangeError|at .*\.(ts|js)|node_modules/);
  return body;
}

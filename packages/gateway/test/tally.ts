/** How many responses (or status codes) of each status: `{200: 5, 429: 45}`. */
export function tally(items: readonly (Response | number)[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const item of items) {
    const status = typeof item === "number" ? item : item.status;
    counts[status] = (counts[status] ?? 0) + 1;
  }
  return counts;
}

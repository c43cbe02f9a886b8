/** The rate-limit windows a key can be given a quota in, with their length in seconds. */
export const WINDOW_SECONDS = { second: 1, minute: 60, hour: 3_600, day: 86_400 } as const;

export type Window = keyof typeof WINDOW_SECONDS;

export const WINDOWS = Object.keys(WINDOW_SECONDS) as Window[];

/** Requests admitted per window; an absent window is not limited. */
export type Limits = Partial<Record<Window, number>>;

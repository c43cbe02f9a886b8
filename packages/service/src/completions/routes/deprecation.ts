/**
 * Chat Completions is deprecated in favour of Responses (the contract's
 * section 9): every answer of its endpoints says so (RFC 9745 `Deprecation`,
 * a date as `@<seconds>`, 2025-03-11, when the Responses API was published;
 * RFC 8594's successor link). Its routes declare it: `deprecated: DEPRECATED`.
 */
export const DEPRECATED = {
  headers: { Deprecation: "@1741651200", Link: '</api/v1/llm/responses>; rel="successor-version"' },
};

export const TAG = "Chat Completions";

// Test code reads JSON bodies it then asserts on field by field; `any` keeps those assertions readable.
declare global {
  interface Response {
    // biome-ignore lint/suspicious/noExplicitAny: see above
    json(): Promise<any>;
  }
}

export {};

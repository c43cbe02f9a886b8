import { AppError, errorBody, responseFailure, streamErrorChunk, toAppError } from "@gw/core/errors";
import { describe, expect, it } from "vitest";
import { ProviderFailed, ProviderRateLimited, ProviderTimeout } from "../src/llm/errors.ts";

/** Errors that end a stream already begun are told as the catalogue tells them in JSON. */
describe("stream errors", () => {
  it("a catalogue error ends a chat completions stream with the body a JSON answer on /llm carries", () => {
    for (const err of [
      new ProviderTimeout(),
      new ProviderFailed("it answered HTTP 500", { detail: "secret" }),
    ]) {
      expect(streamErrorChunk(err, "The completion failed")).toEqual(errorBody(err, { openai: true }));
    }
    expect(streamErrorChunk(new ProviderTimeout(), "x")).toEqual({
      error: {
        message: "The model provider did not answer in time",
        type: "server_error",
        param: null,
        code: "gateway_timeout",
      },
    });
  });

  it("anything else is an internal error with the fallback text, never its own", () => {
    const err = new Error("connect ECONNREFUSED 10.0.0.7:5432 password=hunter2");
    expect(streamErrorChunk(err, "The completion failed")).toEqual({
      error: { message: "The completion failed", type: "server_error", param: null, code: "internal" },
    });
    expect(responseFailure(err, "The response failed")).toEqual({
      code: "server_error",
      message: "The response failed",
    });
    expect(toAppError(err, "fallback")).toMatchObject({ code: "internal", message: "fallback" });
  });

  it("a failed response says rate_limit_exceeded for a rate limit (the provider's 429 included), server_error otherwise", () => {
    expect(responseFailure(new ProviderRateLimited(null, "slow down"), "x")).toEqual({
      code: "rate_limit_exceeded",
      message: "The model provider is rate limiting this service; try again later",
    });
    expect(responseFailure(new AppError("rate_limited", "Rate limit exceeded"), "x").code).toBe(
      "rate_limit_exceeded",
    );
    expect(responseFailure(new ProviderFailed("it answered HTTP 500"), "x")).toEqual({
      code: "server_error",
      message: "The model provider failed: it answered HTTP 500",
    });
    expect(responseFailure(new AppError("service_unavailable", "down"), "x").code).toBe("server_error");
  });
});

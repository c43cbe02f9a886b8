"""openai-python against the gateway, as its users call it (run by openai-python.ts).

Environment: GATEWAY_URL, GATEWAY_KEY, LIMITED_KEY (a key allowed 2 requests a
minute). Every object is also validated with openai-python's own pydantic
types (`model_validate` on the raw JSON, which is strict where the SDK's
default parsing is lenient). Prints one line per case; exits non-zero on the
first failure.
"""

import json
import os
import sys

import openai
from openai import OpenAI
from openai.types import FileDeleted, FileObject, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.conversations import Conversation, ConversationItem, ConversationItemList
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

BASE = os.environ["GATEWAY_URL"] + "/api/v1/llm"
client = OpenAI(base_url=BASE, api_key=os.environ["GATEWAY_KEY"], default_headers={"X-On-Behalf-Of": "alice"}, max_retries=0)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "strict": False,
}
events = TypeAdapter(ResponseStreamEvent)


def strict(model, obj):
    """Validates the SDK object's JSON with the SDK's pydantic type, as OpenAI's own answer would be."""
    if isinstance(model, TypeAdapter):
        return model.validate_python(obj.model_dump(mode="json", exclude_unset=True))
    return model.model_validate(obj.model_dump(mode="json", exclude_unset=True))


def case(name):
    def run(fn):
        fn()
        print(f"ok {name}", flush=True)
        return fn

    return run


@case("responses: create, retrieve, delete")
def _():
    created = client.responses.create(model="auto", input="hello there")
    strict(Response, created)
    assert created.output_text == "Echo: hello there", created.output_text
    assert created.usage.input_tokens_details.cache_write_tokens == 0
    assert client.responses.retrieve(created.id).output_text == created.output_text
    client.responses.delete(created.id)
    try:
        client.responses.retrieve(created.id)
        raise AssertionError("retrieved after delete")
    except openai.NotFoundError as e:
        assert e.code == "not_found", e.code


@case("responses: stream, every event a ResponseStreamEvent, and one model name throughout")
def _():
    with client.responses.stream(model="auto", input="one two three") as stream:
        seen = [e for e in stream]
        final = stream.get_final_response()
    for e in seen:
        strict(events, e)
    assert final.output_text == "Echo: one two three"
    assert seen[0].type == "response.created" and seen[0].response.model == final.model, (seen[0].response.model, final.model)


@case("responses: a tool round trip, chained by previous_response_id")
def _():
    first = client.responses.create(model="auto", input="Paris", tools=[WEATHER])
    strict(Response, first)
    call = next(o for o in first.output if o.type == "function_call")
    second = client.responses.create(
        model="auto",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],
    )
    assert second.output_text == "Echo: sunny", second.output_text
    # The same turn without chaining: the output items' model_dump() sent back as input, None and all.
    third = client.responses.create(
        model="auto",
        input=[
            {"role": "user", "content": "Paris"},
            *[o.model_dump() for o in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": "cloudy"},
        ],
        tools=[WEATHER],
        store=False,
    )
    assert third.output_text == "Echo: cloudy", third.output_text


@case("responses: fields frameworks set by default are taken")
def _():
    r = client.responses.create(
        model="auto",
        input="hi",
        prompt_cache_key="thread-1",
        safety_identifier="u-1",
        service_tier="auto",
        include=["reasoning.encrypted_content"],
        reasoning={"effort": "low", "summary": "auto"},
        max_tool_calls=4,
    )
    strict(Response, r)
    assert r.service_tier == "auto" and r.max_tool_calls == 4


@case("conversations and their items")
def _():
    conv = client.conversations.create(items=[{"type": "message", "role": "user", "content": "Hi"}])
    strict(Conversation, conv)
    added = client.conversations.items.create(
        conv.id, items=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]}]
    )
    strict(ConversationItemList, added)
    client.responses.create(model="auto", conversation=conv.id, input="more")
    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert len(items) == 4, items
    for item in items:
        strict(TypeAdapter(ConversationItem), item)
    client.conversations.delete(conv.id)


@case("chat completions: model_dump() of the answer appended and sent back, with the tool's result")
def _():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["parameters"]}}]
    messages = [{"role": "user", "content": "Paris"}]
    resp = client.chat.completions.create(model="auto", messages=messages, tools=tools, seed=7, stop=["\n\n"])
    strict(ChatCompletion, resp)
    messages.append(resp.choices[0].message.model_dump())  # function_call: None, audio: None, refusal: None…
    call = resp.choices[0].message.tool_calls[0]
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    again = client.chat.completions.create(model="auto", messages=messages, tools=tools)
    assert again.choices[0].message.content == "Echo: sunny", again.choices[0].message.content


@case("chat completions: a stream with usage, every chunk a ChatCompletionChunk")
def _():
    chunks = list(client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "one two"}], stream=True, stream_options={"include_usage": True}
    ))
    for c in chunks:
        strict(ChatCompletionChunk, c)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: one two"
    assert chunks[-1].usage.completion_tokens == 3
    assert len({c.model for c in chunks}) == 1


@case("chat completions: n answers, penalties, logit_bias and logprobs; n refused by name on responses")
def _():
    resp = client.chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "one two"}],
        n=2,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        logit_bias={"42": -100},
        logprobs=True,
        top_logprobs=1,
    )
    strict(ChatCompletion, resp)
    assert [(c.index, c.message.content) for c in resp.choices] == [(0, "Echo: one two"), (1, "Echo: one two #2")], resp
    assert "".join(t.token for t in resp.choices[1].logprobs.content) == "Echo: one two #2"
    assert resp.choices[0].logprobs.content[0].top_logprobs[0].token == "Echo:?"
    assert resp.usage.completion_tokens == 3 + 4, resp.usage  # both answers' tokens
    texts = {}
    for chunk in client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], n=3, stream=True
    ):
        strict(ChatCompletionChunk, chunk)
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert texts == {0: "Echo: hi", 1: "Echo: hi #2", 2: "Echo: hi #3"}, texts
    try:
        client.responses.create(model="auto", input="hi", extra_body={"n": 2})
        raise AssertionError("a response took n")
    except openai.UnprocessableEntityError as e:
        assert e.param == "n" and e.code == "value_error", vars(e)
        assert "chat completions take n" in e.message, e.message


@case("chat completions: parse() a pydantic tool's arguments; stored completions")
def _():
    class GetWeather(BaseModel):
        text: str

    parsed = client.chat.completions.parse(
        model="auto",
        messages=[{"role": "user", "content": "Oslo"}],
        tools=[openai.pydantic_function_tool(GetWeather, name="get_weather")],
        store=True,
    )
    assert parsed.choices[0].message.tool_calls[0].function.parsed_arguments == GetWeather(text="Oslo")
    stored = client.chat.completions.retrieve(parsed.id)
    strict(ChatCompletion, stored)
    assert [m.content for m in client.chat.completions.messages.list(parsed.id)] == ["Oslo"]
    client.chat.completions.delete(parsed.id)


@case("models and input tokens")
def _():
    models = list(client.models.list())
    for m in models:
        strict(Model, m)
    assert client.models.retrieve(models[0].id).id == models[0].id
    assert client.responses.input_tokens.count(model="auto", input="hello").input_tokens > 0


@case("files: create as multipart with expires_after, retrieve, list, content, delete; an empty file is a 422")
def _():
    data = b"retrieval notes: the moon is made of basalt\n"
    created = client.files.create(
        file=("notes.md", data, "text/markdown"),
        purpose="assistants",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    strict(FileObject, created)
    assert created.id.startswith("file_") and len(created.id) == 37, created.id
    assert (created.bytes, created.filename, created.purpose) == (len(data), "notes.md", "assistants"), created
    assert created.expires_at == created.created_at + 3600, created
    assert client.files.retrieve(created.id) == created
    assert [f.id for f in client.files.list(purpose="assistants")] == [created.id]
    content = client.files.content(created.id)
    assert content.read() == data
    assert content.response.headers["content-disposition"] == "attachment; filename=notes.md"
    assert content.response.headers["x-content-type-options"] == "nosniff"
    try:
        client.files.create(file=("empty.txt", b""), purpose="assistants")
        raise AssertionError("accepted an empty file")
    except openai.UnprocessableEntityError as e:
        assert e.param == "file" and e.code == "value_error", vars(e)
    bob = client.with_options(default_headers={"X-On-Behalf-Of": "bob"})
    try:
        bob.files.retrieve(created.id)
        raise AssertionError("bob read alice's file")
    except openai.NotFoundError:
        pass
    deleted = client.files.delete(created.id)
    strict(FileDeleted, deleted)
    assert deleted.deleted and deleted.id == created.id
    try:
        client.files.retrieve(created.id)
        raise AssertionError("retrieved after delete")
    except openai.NotFoundError:
        pass


@case("errors: 422 names the field, 404, and the key's 429 is a RateLimitError")
def _():
    try:
        client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": "x"}], extra_body={"colour": "red"}
        )
        raise AssertionError("accepted an unknown field")
    except openai.UnprocessableEntityError as e:
        assert e.status_code == 422
        assert e.param == "colour" and e.code == "extra_forbidden" and e.type == "invalid_request_error", vars(e)
        assert "colour" in e.message and "detail" in e.message
    try:
        client.conversations.retrieve("conv_unknown")
        raise AssertionError("found an unknown conversation")
    except openai.NotFoundError:
        pass
    limited = OpenAI(base_url=BASE, api_key=os.environ["LIMITED_KEY"], max_retries=0)
    try:
        for _ in range(3):
            limited.models.list()
        raise AssertionError("no 429")
    except openai.RateLimitError as e:
        assert e.body == "Rate limit exceeded", e.body  # the SDK keeps the body's `error`: the contract's text


print(f"openai-python {openai.__version__}: all cases passed", flush=True)
sys.exit(0)

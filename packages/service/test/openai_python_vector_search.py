"""openai-python's vector_stores.search and responses.create(tools=[file_search]) through the gateway.

Run by packages/service/src/vector-stores/routes/search-vector-store.test.ts. Environment: GATEWAY_URL,
GATEWAY_KEY, STORE_ID, SHARED_FILE (bob may read it), SECRET_FILE (he may not). Every object is validated
with openai-python's own pydantic types. Prints one line per case; exits non-zero on the first failure.
"""

import os

import openai
from openai import OpenAI
from openai.types import VectorStoreSearchResponse
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

BASE = os.environ["GATEWAY_URL"] + "/api/v1/llm"
bob = OpenAI(base_url=BASE, api_key=os.environ["GATEWAY_KEY"], default_headers={"X-On-Behalf-Of": "bob"}, max_retries=0)
STORE, SHARED, SECRET = os.environ["STORE_ID"], os.environ["SHARED_FILE"], os.environ["SECRET_FILE"]
TOOL = {"type": "file_search", "vector_store_ids": [STORE], "max_num_results": 5}
events = TypeAdapter(ResponseStreamEvent)


def strict(model, obj):
    return model.model_validate(obj.model_dump(mode="json", exclude_unset=True))


def case(name):
    def run(fn):
        fn()
        print(f"ok {name}", flush=True)
        return fn

    return run


@case("vector_stores.search: only the chunks of the file bob may read")
def _():
    page = bob.vector_stores.search(STORE, query="apple orchard harvest", max_num_results=10)
    results = list(page)
    assert [r.file_id for r in results] == [SHARED], results
    for r in results:
        strict(VectorStoreSearchResponse, r)
        assert r.filename == "schedule.txt" and r.content[0].type == "text" and 0 <= r.score <= 1, r
    filtered = bob.vector_stores.search(
        STORE, query=["apple", "harvest"], filters={"type": "eq", "key": "topic", "value": "none"}
    )
    assert list(filtered) == [], filtered


@case("responses.create with file_search: a file_search_call with results, the answer citing only bob's file")
def _():
    response = bob.responses.create(
        model="gpt-4o-mini", input="apple orchard harvest", tools=[TOOL], include=["file_search_call.results"]
    )
    strict(Response, response)
    call, message = response.output[0], response.output[1]
    assert call.type == "file_search_call" and call.status == "completed", call
    assert call.queries == ["apple orchard harvest"], call
    assert [r.file_id for r in call.results] == [SHARED], call.results
    cited = [a.file_id for a in message.content[0].annotations if a.type == "file_citation"]
    assert cited == [SHARED], message
    assert SECRET not in response.model_dump_json()


@case("responses.create with file_search, streamed: OpenAI's file_search_call events")
def _():
    seen = []
    with bob.responses.stream(model="gpt-4o-mini", input="apple orchard harvest", tools=[TOOL]) as stream:
        for event in stream:
            events.validate_python(event.model_dump(mode="json", exclude_unset=True))
            seen.append(event.type)
        final = stream.get_final_response()
    for expected in [
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_text.annotation.added",
    ]:
        assert expected in seen, seen
    assert final.output[0].type == "file_search_call" and final.output[0].results is None, final.output[0]


print(f"openai-python {openai.__version__}: all cases passed", flush=True)

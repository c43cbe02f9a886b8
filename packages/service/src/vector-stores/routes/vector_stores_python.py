"""openai-python's vector stores against the gateway (run by vector-stores.python.test.ts).

Environment: GATEWAY_URL, GATEWAY_KEY. Every object is also validated with
openai-python's own pydantic types (`model_validate` on the raw JSON). Prints
one line per case; exits non-zero on the first failure.
"""

import io
import os

import openai
from openai import OpenAI
from openai.types import VectorStore, VectorStoreDeleted
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch

BASE = os.environ["GATEWAY_URL"] + "/api/v1/llm"
client = OpenAI(base_url=BASE, api_key=os.environ["GATEWAY_KEY"], default_headers={"X-On-Behalf-Of": "alice"}, max_retries=0)


def strict(model, obj):
    """Validates the SDK object's JSON with the SDK's pydantic type, as OpenAI's own answer would be."""
    return model.model_validate(obj.model_dump(mode="json", exclude_unset=True))


def case(name):
    def run(fn):
        fn()
        print(f"ok {name}", flush=True)
        return fn

    return run


@case("vector_stores.create with a file, retrieve, update, list, delete")
def _():
    uploaded = client.files.create(file=("faq.md", io.BytesIO(b"# FAQ\nThe office opens at nine."), "text/markdown"), purpose="assistants")
    store = client.vector_stores.create(
        name="faq",
        file_ids=[uploaded.id],
        expires_after={"anchor": "last_active_at", "days": 7},
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50}},
        metadata={"team": "ops"},
    )
    strict(VectorStore, store)
    assert store.name == "faq" and store.metadata == {"team": "ops"}, store
    assert store.expires_after.days == 7 and store.expires_at is not None, store
    file = client.vector_stores.files.poll(uploaded.id, vector_store_id=store.id, poll_interval_ms=100)
    strict(VectorStoreFile, file)
    assert file.status == "completed", file
    assert file.chunking_strategy.static.max_chunk_size_tokens == 200, file
    renamed = client.vector_stores.update(store.id, name="faq 2")
    assert renamed.name == "faq 2" and renamed.file_counts.completed == 1, renamed
    assert store.id in [s.id for s in client.vector_stores.list()]
    deleted = client.vector_stores.delete(store.id)
    strict(VectorStoreDeleted, deleted)
    assert deleted.deleted


@case("vector_stores.files.upload_and_poll, file batches, files listed and deleted")
def _():
    store = client.vector_stores.create(name="uploads")
    file = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id,
        file=("notes.txt", io.BytesIO(b"Quarterly planning happens in March."), "text/plain"),
        poll_interval_ms=100,
    )
    strict(VectorStoreFile, file)
    assert file.status == "completed" and file.last_error is None and file.usage_bytes > 0, file
    batch = client.vector_stores.file_batches.upload_and_poll(
        vector_store_id=store.id,
        files=[("a.txt", io.BytesIO(b"alpha"), "text/plain"), ("b.txt", io.BytesIO(b"beta"), "text/plain")],
        poll_interval_ms=100,
    )
    strict(VectorStoreFileBatch, batch)
    assert batch.status == "completed" and batch.file_counts.completed == 2, batch
    listed = list(client.vector_stores.files.list(vector_store_id=store.id, filter="completed"))
    assert len(listed) == 3, listed
    for f in listed:
        strict(VectorStoreFile, f)
    removed = client.vector_stores.files.delete(file.id, vector_store_id=store.id)
    assert removed.deleted, removed
    try:
        client.vector_stores.files.retrieve(file.id, vector_store_id=store.id)
        raise AssertionError("a file taken out of the store is still there")
    except openai.NotFoundError:
        pass
    client.vector_stores.delete(store.id)


print(f"openai-python {openai.__version__}: all cases passed", flush=True)

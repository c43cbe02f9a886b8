import { randomBytes } from "node:crypto";
import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { FileRef } from "../files/contents.ts";
import type { Files } from "../files/files.ts";
import type { Ids } from "../ids.ts";
import type { Attributes } from "./attribute-filter.ts";
import type { IngestJob, IngestQueue } from "./ingestion/queue.ts";
import type {
  Attachment,
  Chunking,
  FileBatchObject,
  FileRefInStore,
  VectorStoreFileObject,
  VectorStoreObject,
  VectorStoreStore,
} from "./store.ts";
import type { VectorIndex } from "./vector-index.ts";

/** Expired stores deleted per batch of the sweep. */
export const STORE_SWEEP_BATCH = 50;

/** A file to put in a store, as a request names it. */
export interface FileSpec {
  fileId: string;
  attributes: Attributes;
  chunking: Chunking;
}

export interface VectorStoresDeps {
  store: VectorStoreStore;
  index: VectorIndex;
  queue: IngestQueue;
  files: Files;
  authorization: ResourceAuthorization;
  ids: Ids;
  logger: Logger;
}

/** An ingestion's id: its queue job's too. */
const newGeneration = () => randomBytes(16).toString("hex");

/**
 * Vector stores as the routes and the sweep use them: the store of records
 * (`VectorStoreStore`), the vector index that holds the chunks, the
 * ingestion queue, and the ownership of each store in SpiceDB. A file is
 * put in a store only by a principal that may read it (asked in bulk, as
 * fresh as the organization's last write) and write the store.
 */
export class VectorStores {
  readonly store: VectorStoreStore;
  readonly index: VectorIndex;
  private readonly queue: IngestQueue;
  private readonly files: Files;
  private readonly authorization: ResourceAuthorization;
  private readonly ids: Ids;
  private readonly logger: Logger;

  constructor(deps: VectorStoresDeps) {
    this.store = deps.store;
    this.index = deps.index;
    this.queue = deps.queue;
    this.files = deps.files;
    this.authorization = deps.authorization;
    this.ids = deps.ids;
    this.logger = deps.logger;
    // A file deleted or expired leaves every store: its chunks, then its rows.
    deps.files.onRemove((files) => this.filesRemoved(files));
  }

  /**
   * The live stores among `ids` (of `org`, not expired), marked active now
   * (their expiry moves): what a search asks once the caller's reader role on
   * each is known (`searchVectorStores`).
   */
  searchable(org: string, ids: readonly string[]): Promise<string[]> {
    return this.store.touch(org, ids);
  }

  /**
   * Creates a store the principal owns (SpiceDB first: if storing fails, the
   * ownership is given back), with the files given, which the principal
   * must be able to read (checked before anything is created).
   */
  async create(
    principal: Principal,
    input: {
      name: string;
      metadata: Record<string, string>;
      expiresAfterDays: number | null;
      files: FileSpec[];
    },
  ): Promise<VectorStoreObject> {
    const files = unique(input.files);
    await this.assertReadable(principal, files);
    const id = this.ids.newId("vs");
    const resource = { type: "vector_store" as const, id };
    await this.authorization.createOwnership(principal, resource);
    try {
      await this.store.create(principal.org, { id, ...input });
    } catch (err) {
      // Not stored: its id must keep no owner relationship (else the orphan reconciler removes it).
      await this.authorization.deleteResource(principal, resource).catch(() => undefined);
      throw err;
    }
    if (files.length > 0) await this.attachReadable(principal, id, files);
    return (await this.store.get(principal.org, id))!;
  }

  /**
   * Puts files in a store (the principal a writer of it, checked by the
   * route) and queues their ingestion: each file must be one the principal
   * may read, else 404 as if it did not exist. With `batch`, as one file
   * batch. A file in the store already starts over.
   */
  async attach(
    principal: Principal,
    vectorStoreId: string,
    specs: FileSpec[],
    batch?: boolean,
  ): Promise<{ files: VectorStoreFileObject[]; batch?: FileBatchObject }> {
    const files = unique(specs);
    await this.assertReadable(principal, files);
    return this.attachReadable(principal, vectorStoreId, files, batch);
  }

  private async attachReadable(
    principal: Principal,
    vectorStoreId: string,
    files: FileSpec[],
    batch?: boolean,
  ): Promise<{ files: VectorStoreFileObject[]; batch?: FileBatchObject }> {
    const keyId = principal.keyId;
    const attachments: Attachment[] = files.map((f) => ({
      ...f,
      user: principal.user,
      keyId,
      generation: newGeneration(),
    }));
    const attached = await this.store.attach(
      principal.org,
      vectorStoreId,
      attachments,
      batch ? { id: this.ids.newId("vsfb") } : undefined,
    );
    if (!attached) throw notFound(`No vector store ${vectorStoreId}`);
    const jobs: IngestJob[] = attachments.map((a) => ({
      org: principal.org,
      vectorStoreId,
      fileId: a.fileId,
      generation: a.generation,
    }));
    try {
      await this.queue.add(jobs);
    } catch (err) {
      for (const job of jobs)
        await this.store
          .finish(job, job.generation, {
            status: "failed",
            error: { code: "server_error", message: "The file could not be queued for indexing" },
          })
          .catch(() => undefined);
      throw err;
    }
    return attached;
  }

  /** 404 for the first file the principal may not read, or that does not exist (any more). */
  private async assertReadable(principal: Principal, files: readonly FileSpec[]): Promise<void> {
    if (files.length === 0) return;
    const ids = files.map((f) => f.fileId);
    const readable = await this.authorization.checkAll(
      principal,
      ids.map((id) => ({ resource: { type: "file" as const, id }, role: "reader" as const })),
    );
    const unreadable = ids.find((_, i) => !readable[i]);
    if (unreadable !== undefined) throw notFound(`No file ${unreadable}`);
    const live = new Set((await this.files.getMany(principal.org, ids)).map((f) => f.id));
    const gone = ids.find((id) => !live.has(id));
    if (gone !== undefined) throw notFound(`No file ${gone}`);
  }

  /** New attributes of a file in a store, on its record and its chunks. */
  async setAttributes(
    ref: FileRefInStore,
    attributes: Attributes,
  ): Promise<VectorStoreFileObject | undefined> {
    const file = await this.store.setAttributes(ref, attributes);
    if (file) await this.index.setAttributes(ref, attributes);
    return file;
  }

  /** Removes a file from a store: its chunks, then its record (the file itself stays); whether it was there. */
  async detach(ref: FileRefInStore): Promise<boolean> {
    if (!(await this.store.getFile(ref.org, ref.vectorStoreId, ref.fileId))) return false;
    await this.index.deleteFile(ref);
    return this.store.detach(ref);
  }

  /**
   * Deletes a store the principal owns: its relationships (guarded by the
   * ownership when the delete lands), its chunks, then its records.
   */
  async delete(principal: Principal, id: string): Promise<void> {
    await this.authorization.deleteResource(principal, { type: "vector_store", id });
    await this.index.deleteStore(principal.org, id);
    await this.store.delete(principal.org, id);
  }

  /** Files gone (deleted or expired): out of every store, chunks first. */
  private async filesRemoved(files: FileRef[]): Promise<void> {
    const inStores = await this.store.storesOf(files);
    const gone = new Map(inStores.map((f) => [`${f.org}\u0000${f.fileId}`, f]));
    for (const f of gone.values()) await this.index.deleteFileEverywhere(f.org, f.fileId);
    await this.store.detachEverywhere(files);
  }

  /**
   * Deletes the stores expired by `cutoff`, a batch at a time: their
   * relationships (`forget`), chunks, then records. How many.
   */
  async sweepExpired(
    cutoff: Date,
    forget: (stores: { org: string; id: string }[]) => Promise<void>,
  ): Promise<number> {
    let deleted = 0;
    while (true) {
      const stores = await this.store.expired(cutoff, STORE_SWEEP_BATCH);
      if (stores.length === 0) return deleted;
      await forget(stores);
      for (const s of stores) await this.index.deleteStore(s.org, s.id);
      deleted += await this.store.deleteExpired(stores, cutoff);
      if (stores.length < STORE_SWEEP_BATCH) return deleted;
    }
  }
}

/** Each file once: the last spec given for it. */
function unique(specs: readonly FileSpec[]): FileSpec[] {
  return [...new Map(specs.map((s) => [s.fileId, s])).values()];
}

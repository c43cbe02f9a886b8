import type { Route } from "@gw/core/http";
import type { VectorStoreRouteDeps } from "./deps.ts";
import { cancelFileBatch, createFileBatch, getFileBatch, listFileBatchFiles } from "./file-batches.ts";
import {
  createVectorStoreFile,
  deleteVectorStoreFile,
  getVectorStoreFile,
  listVectorStoreFiles,
  updateVectorStoreFileAttributes,
} from "./store-files.ts";
import {
  createVectorStore,
  deleteVectorStore,
  getVectorStore,
  listVectorStores,
  modifyVectorStore,
} from "./stores.ts";

export type { VectorStoreRouteDeps };

/** Every `/api/v1/llm/vector_stores` route but search. */
export const vectorStoreRoutes: Route<VectorStoreRouteDeps>[] = [
  createVectorStore,
  listVectorStores,
  getVectorStore,
  modifyVectorStore,
  deleteVectorStore,
  createVectorStoreFile,
  listVectorStoreFiles,
  getVectorStoreFile,
  updateVectorStoreFileAttributes,
  deleteVectorStoreFile,
  createFileBatch,
  getFileBatch,
  cancelFileBatch,
  listFileBatchFiles,
];

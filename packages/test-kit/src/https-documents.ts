import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedCert } from "./self-signed.ts";

export interface HttpsDocuments {
  /** `https://127.0.0.1:<port>`. */
  url: string;
  /** The server's self-signed certificate (PEM), for the client to trust. */
  ca: string;
  /** JSON documents served by path; a path not set is 404. */
  documents: Map<string, unknown>;
  /** Paths requested, in order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * An https server of JSON documents on 127.0.0.1 with a fresh self-signed
 * certificate: a stand-in for a host that publishes documents at https URLs
 * (an OAuth client's metadata document).
 */
export async function startHttpsDocuments(): Promise<HttpsDocuments> {
  const dir = await mkdtemp(join(tmpdir(), "gw-test-docs-"));
  const { keyFile, certFile } = await selfSignedCert(dir);

  const [key, cert] = await Promise.all([readFile(keyFile), readFile(certFile)]);
  await rm(dir, { recursive: true, force: true });
  const documents = new Map<string, unknown>();
  const requests: string[] = [];
  const server = createServer({ key, cert }, (req, res) => {
    const path = new URL(req.url ?? "/", "https://127.0.0.1").pathname;
    requests.push(path);
    if (!documents.has(path)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(documents.get(path)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ca: cert.toString(),
    documents,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

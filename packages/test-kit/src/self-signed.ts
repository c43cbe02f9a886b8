import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * A self-signed certificate for 127.0.0.1 (P-256, two days), written by
 * `openssl` into `dir` as `key.pem` and `cert.pem`: a test's https server
 * serves it, and its client trusts the certificate as its own CA.
 */
export async function selfSignedCert(dir: string): Promise<{ keyFile: string; certFile: string }> {
  const keyFile = join(dir, "key.pem");
  const certFile = join(dir, "cert.pem");
  await promisify(execFile)("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=127.0.0.1",
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    keyFile,
    "-out",
    certFile,
  ]);
  return { keyFile, certFile };
}

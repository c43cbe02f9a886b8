import { MessageType } from "@protobuf-ts/runtime";

/**
 * SpiceDB's ZedToken payload (`impl.v1.DecodedZedToken`, SpiceDB's
 * proto/internal/impl/v1/impl.proto): base64 of this message, whose `v1.revision`
 * is the datastore revision as text. The engine's memdb revisions are
 * nanosecond timestamps, so they compare as integers.
 */
const V1ZedToken = new MessageType<{ revision: string }>("impl.v1.DecodedZedToken.V1ZedToken", [
  { no: 1, name: "revision", kind: "scalar", T: 9 /* string */ },
]);
const DecodedZedToken = new MessageType<{ v1?: { revision: string } }>("impl.v1.DecodedZedToken", [
  { no: 3, name: "v1", kind: "message", T: () => V1ZedToken },
]);

/** The revision a ZedToken of the local engine stands for, to order tokens of one engine run. */
export function revisionOf(token: string): bigint {
  const revision = DecodedZedToken.fromBinary(Buffer.from(token, "base64")).v1?.revision;
  if (!revision || !/^\d+$/.test(revision)) throw new Error(`not a ZedToken of the local engine: ${token}`);
  return BigInt(revision);
}

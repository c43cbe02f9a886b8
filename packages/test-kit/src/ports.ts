import { createConnection, createServer } from "node:net";
import { freePort } from "@gw/devstack";

/** `count` free ports, none twice. */
export async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/**
 * A port of the test's own that drops every connection: where a process is
 * pointed when a test needs no service or SpiceDB behind it, rather than the
 * default ports, which a `pnpm start` on the same machine may be serving.
 */
export async function startNothingListener(): Promise<{
  url: string;
  address: string;
  close(): Promise<void>;
}> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Whether a TCP connection to `port` of `host` is accepted. */
export function acceptsConnections(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((answer) => {
    const socket = createConnection({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      answer(true);
    });
    socket.once("error", () => answer(false));
  });
}

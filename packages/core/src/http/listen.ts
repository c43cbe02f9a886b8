import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Express } from "express";

/** Starts listening and resolves with the server and the port it got (useful with port 0). */
export function listen(app: Express, port: number, host: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (err?: Error) =>
      err ? reject(err) : resolve({ server, port: (server.address() as AddressInfo).port }),
    );
  });
}

/** Stops accepting connections, lets in-flight requests finish for up to `graceMs`, then cuts the rest. */
export function closeGracefully(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs).unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

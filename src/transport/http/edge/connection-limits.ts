import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import { clientOf } from "../../client-address.js";
import { rawErrorResponse, toHttpError } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";

/** Retry-After of a connection refused for its client's cap. */
const CONNECTION_RETRY_AFTER_SECONDS = 1;

export interface ConnectionLimits {
  /** Open connections of the port, all clients together (Node closes the ones beyond at once). */
  readonly maxConnections: number;
  /** Open connections of one client address. */
  readonly maxConnectionsPerClient: number;
}

/** How long a refused connection stays open for its client to read the refusal (then it is closed regardless). */
const REFUSAL_GRACE_MS = 1_000;

/** Connections answered with the refusal: whatever requests they still send are never handed to the app. */
const refused = new WeakSet<Socket>();

/** Whether `socket` was refused for its client's cap (its requests are dropped: see limitPipelining). */
export const isRefused = (socket: Socket): boolean => refused.has(socket);

/**
 * Caps open connections, in all and per client address. A connection beyond
 * its client's cap is answered at once: a minimal `429 too_many_connections`
 * with `Retry-After: 1` and `Connection: close` (in the platform's error
 * shape: no path has been read); whatever the client sends meanwhile is
 * read and dropped, never handed to the app (isRefused), and the connection
 * is closed once the client closes its side or after REFUSAL_GRACE_MS. One
 * client holding its cap in slow requests thus cannot take the sockets every
 * other client needs.
 */
export function limitConnections(server: Server, limits: ConnectionLimits, log: FastifyBaseLogger): void {
  server.maxConnections = limits.maxConnections;
  server.on("drop", () => log.debug("connection dropped: MAX_CONNECTIONS reached"));
  const refusal = rawErrorResponse("/", toHttpError(new GatewayError(
    429, "too_many_connections",
    `too many open connections from this address (at most ${limits.maxConnectionsPerClient}); retry shortly`,
    CONNECTION_RETRY_AFTER_SECONDS,
  )));
  const open = new Map<string, number>();
  // Before Node's own listener (the HTTP parser's set-up), which runs for every connection.
  server.prependListener("connection", (socket: Socket) => {
    const client = clientOf(socket.remoteAddress);
    const count = client === undefined ? 0 : open.get(client) ?? 0;
    if (client !== undefined && count >= limits.maxConnectionsPerClient) {
      log.debug({ client }, "connection refused: MAX_CONNECTIONS_PER_CLIENT reached");
      refused.add(socket);
      refuse(socket, refusal);
      return;
    }
    if (client !== undefined) {
      open.set(client, count + 1);
      socket.once("close", () => {
        const left = (open.get(client) ?? 1) - 1;
        if (left > 0) open.set(client, left);
        else open.delete(client);
      });
    }
  });
}

function refuse(socket: Socket, answer: string): void {
  socket.on("error", () => {});
  socket.end(answer);
  const timer = setTimeout(() => socket.destroy(), REFUSAL_GRACE_MS);
  timer.unref();
  socket.once("end", () => socket.destroy());
  socket.once("close", () => clearTimeout(timer));
}

import type { Server } from "node:http";
import type { Http2Server, ServerHttp2Session } from "node:http2";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import { clientOf } from "./client-address.js";
import { rawErrorResponse } from "./http/error-replies.js";
import { GatewayError } from "./http/gateway-error.js";

// What a connection may hold before a request is read, on both ports: connections in all and per client, HTTP/2's clocks.

/** Open connections per client address: `admit` answers false once the client holds `max` (its count drops when a socket closes). */
function perClient(max: number): (client: string, socket: Socket) => boolean {
  const open = new Map<string, number>();
  return (client, socket) => {
    const count = open.get(client) ?? 0;
    if (count >= max) return false;
    open.set(client, count + 1);
    socket.once("close", () => {
      const left = open.get(client)! - 1;
      if (left > 0) open.set(client, left);
      else open.delete(client);
    });
    return true;
  };
}

/** Retry-After of a connection refused for its client's cap. */
const CONNECTION_RETRY_AFTER_SECONDS = 1;

export interface HttpConnectionLimits {
  /** Open connections of the port, all clients together (Node closes the ones beyond at once). */
  readonly maxConnections: number;
  readonly maxConnectionsPerClient: number;
}

/** How long a refused connection stays open for its client to read the refusal. */
const REFUSAL_GRACE_MS = 1_000;

/** Connections answered with the refusal: whatever requests they still send are never handed to the app. */
const refused = new WeakSet<Socket>();

export const isRefused = (socket: Socket): boolean => refused.has(socket);

/** Caps the gateway's connections, so one client's slow requests cannot take the sockets others need (429 beyond its cap). */
export function limitConnections(server: Server, limits: HttpConnectionLimits, log: FastifyBaseLogger): void {
  server.maxConnections = limits.maxConnections;
  server.on("drop", () => log.debug("connection dropped: MAX_CONNECTIONS reached"));
  const refusal = rawErrorResponse("/", new GatewayError(
    429, "too_many_connections",
    `too many open connections from this address (at most ${limits.maxConnectionsPerClient}); retry shortly`,
    CONNECTION_RETRY_AFTER_SECONDS,
  ));
  const admit = perClient(limits.maxConnectionsPerClient);
  // Before Node's own listener (the HTTP parser's set-up), which runs for every connection.
  server.prependListener("connection", (socket: Socket) => {
    const client = clientOf(socket.remoteAddress);
    if (client === undefined || admit(client, socket)) return;
    log.debug({ client }, "connection refused: MAX_CONNECTIONS_PER_CLIENT reached");
    refused.add(socket);
    socket.on("error", () => {});
    socket.end(refusal);
    const timer = setTimeout(() => socket.destroy(), REFUSAL_GRACE_MS).unref();
    socket.once("end", () => socket.destroy());
    socket.once("close", () => clearTimeout(timer));
  });
}

// The core port (HTTP/2).

export interface Http2ConnectionLimits extends HttpConnectionLimits {
  /** HTTP_HEADERS_TIMEOUT: a new connection must complete the HTTP/2 preface (magic and SETTINGS) within this. */
  readonly headersTimeoutMs: number;
  /** HTTP_IDLE_TIMEOUT: see guardSession. */
  readonly idleTimeoutMs: number;
}

/** A line below an error (debug): what the edge refused or saw end, with its facts; never a stack. */
export type DebugLog = (message: string, facts?: Record<string, unknown>) => void;

/** The core port's listening socket: connections are capped before HTTP/2 (and its buffers) sees them, then handed to `server`. */
export function guardedListener(server: Http2Server, limits: Http2ConnectionLimits, debug: DebugLog = () => {}): NetServer {
  const admit = perClient(limits.maxConnectionsPerClient);
  const listener = createNetServer((socket: Socket) => {
    // No address: the peer is already gone; such sockets count together until they close.
    const client = clientOf(socket.remoteAddress) ?? "";
    if (admit(client, socket)) return server.emit("connection", socket);
    debug("connection refused: MAX_CONNECTIONS_PER_CLIENT reached", { client });
    socket.destroy();
  });
  listener.maxConnections = limits.maxConnections;
  server.on("session", (session: ServerHttp2Session) => guardSession(session, limits));
  return listener;
}

/** Preface in time; idle with no call (gRPC's MAX_CONNECTION_IDLE): closed; calls open but silent: pinged, destroyed if mute. */
function guardSession(session: ServerHttp2Session, limits: Http2ConnectionLimits): void {
  if (session.destroyed) return;
  const preface = setTimeout(() => session.destroy(), limits.headersTimeoutMs);
  let idle: NodeJS.Timeout | undefined;
  let openCalls = 0;
  let pinging = false;
  const idleFromNow = () => {
    clearTimeout(idle);
    // GOAWAY, so a well-behaved client opens a new connection for its next call; the socket is closed in any case.
    idle = setTimeout(() => {
      const force = setTimeout(() => session.destroy(), Math.min(limits.idleTimeoutMs, 1_000)).unref();
      session.close(() => clearTimeout(force));
    }, limits.idleTimeoutMs);
  };
  session.once("remoteSettings", () => {
    clearTimeout(preface);
    if (session.destroyed) return;
    idleFromNow();
    session.setTimeout(limits.idleTimeoutMs);
  });
  session.on("stream", (stream) => {
    openCalls++;
    clearTimeout(idle);
    stream.once("close", () => {
      openCalls--;
      if (openCalls === 0 && !session.closed && !session.destroyed) idleFromNow();
    });
  });
  session.once("close", () => {
    clearTimeout(preface);
    clearTimeout(idle);
  });
  session.on("timeout", () => {
    if (session.closed || session.destroyed || openCalls === 0 || pinging) return;
    pinging = true;
    const mute = setTimeout(() => session.destroy(), limits.idleTimeoutMs);
    const sent = session.ping((error) => {
      clearTimeout(mute);
      pinging = false;
      if (error) session.destroy();
      // The timer fires once per quiet spell: arm it again for the next one.
      else if (!session.destroyed) session.setTimeout(limits.idleTimeoutMs);
    });
    if (!sent) {
      clearTimeout(mute);
      session.destroy();
    }
  });
}

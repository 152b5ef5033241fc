import type { Server } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import { clientOf } from "./client-address.js";
import { rawErrorResponse, toHttpError } from "./http/error-replies.js";
import { GatewayError } from "./http/gateway-error.js";
import type { Http2Server, ServerHttp2Session } from "node:http2";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";

/*
 * What a connection may hold before a request is read, in one place for both ports: open connections in all and
 * per client address (an IPv4 address, an IPv6 /64: clientOf) on the gateway's HTTP/1.1 port and the core's HTTP/2
 * port, and the HTTP/2 sessions' own clocks (preface, idle, mute).
 */

// The gateway port (HTTP/1.1).

/** Retry-After of a connection refused for its client's cap. */
const CONNECTION_RETRY_AFTER_SECONDS = 1;

export interface HttpConnectionLimits {
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
export function limitConnections(server: Server, limits: HttpConnectionLimits, log: FastifyBaseLogger): void {
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

// The core port (HTTP/2).

export interface Http2ConnectionLimits {
  /** HTTP_HEADERS_TIMEOUT: a new connection must complete the HTTP/2 preface (magic and SETTINGS) within this. */
  readonly headersTimeoutMs: number;
  /** HTTP_IDLE_TIMEOUT: a session with no call open for this long is closed (with calls open but no frames: pinged, closed if mute). */
  readonly idleTimeoutMs: number;
  /** MAX_CONNECTIONS: open connections, all clients together. */
  readonly maxConnections: number;
  /** MAX_CONNECTIONS_PER_CLIENT: open connections from one client (an IPv4 address, an IPv6 /64: see clientOf). */
  readonly maxConnectionsPerClient: number;
}

/** A line below an error (debug): what the edge refused or saw end, with its facts; never a stack. */
export type DebugLog = (message: string, facts?: Record<string, unknown>) => void;

/**
 * The core port's listening socket, in front of the HTTP/2 server: it bounds
 * what connections may hold before HTTP/2 sees them.
 * - beyond MAX_CONNECTIONS Node closes a new connection at once (net.Server#maxConnections);
 * - beyond MAX_CONNECTIONS_PER_CLIENT from one client (an IPv4 address, also IPv4-mapped; an IPv6 /64,
 *   as the gateway counts them: clientOf), a new connection is closed at once, before an HTTP/2
 *   session (and its buffers) exists for it;
 * - a connection that has not sent the HTTP/2 preface within HTTP_HEADERS_TIMEOUT is closed;
 * - a session with no call open for HTTP_IDLE_TIMEOUT is closed (GOAWAY, then the socket), even
 *   if it sends PINGs; one with calls open (a health Watch, a long stream) but silent for as long
 *   is pinged and closed only if the peer does not answer within another HTTP_IDLE_TIMEOUT.
 * A call whose request is slow to arrive is the request timeout's business (GuardedCall).
 * Admitted connections are handed to `server` as its "connection" event (as Node documents for injecting them).
 */
export function guardedListener(server: Http2Server, limits: Http2ConnectionLimits, debug: DebugLog = () => {}): NetServer {
  const perClient = new Map<string, number>();
  const listener = createNetServer((socket: Socket) => {
    // No address: the peer is already gone; such sockets count together until they close.
    const client = clientOf(socket.remoteAddress) ?? "";
    const open = perClient.get(client) ?? 0;
    if (open >= limits.maxConnectionsPerClient) {
      debug("connection refused: MAX_CONNECTIONS_PER_CLIENT reached", { client });
      socket.destroy();
      return;
    }
    perClient.set(client, open + 1);
    socket.once("close", () => {
      const left = (perClient.get(client) ?? 1) - 1;
      if (left > 0) perClient.set(client, left);
      else perClient.delete(client);
    });
    server.emit("connection", socket);
  });
  listener.maxConnections = limits.maxConnections;
  server.on("session", (session: ServerHttp2Session) => guardSession(session, limits));
  return listener;
}

/**
 * One session's clocks. Preface: HTTP_HEADERS_TIMEOUT from the connection to
 * the peer's first SETTINGS. Idle, as gRPC's MAX_CONNECTION_IDLE: no call
 * open for HTTP_IDLE_TIMEOUT closes the session, whatever frames (PINGs)
 * keep coming. Mute: calls open but no frame at all for HTTP_IDLE_TIMEOUT
 * (a Watch with nothing to say, or a peer gone without a word): the peer is
 * pinged and the session destroyed if it does not answer in as long again.
 */
function guardSession(session: ServerHttp2Session, limits: Http2ConnectionLimits): void {
  if (session.destroyed) return;
  const preface = setTimeout(() => session.destroy(), limits.headersTimeoutMs);
  let idle: NodeJS.Timeout | undefined;
  let openCalls = 0;
  let pinging = false;
  const idleFromNow = () => {
    clearTimeout(idle);
    idle = setTimeout(() => closeIdle(session, limits.idleTimeoutMs), limits.idleTimeoutMs);
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

/** GOAWAY, so a well-behaved client opens a new connection for its next call; the socket is closed in any case. */
function closeIdle(session: ServerHttp2Session, graceMs: number): void {
  const force = setTimeout(() => session.destroy(), Math.min(graceMs, 1_000));
  force.unref();
  session.close(() => clearTimeout(force));
}

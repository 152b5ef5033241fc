import type { Http2Server, ServerHttp2Session } from "node:http2";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { clientOf } from "../client-address.js";

export interface ConnectionLimits {
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
export function guardedListener(server: Http2Server, limits: ConnectionLimits, debug: DebugLog = () => {}): NetServer {
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
function guardSession(session: ServerHttp2Session, limits: ConnectionLimits): void {
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

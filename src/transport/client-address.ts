import { createHmac, timingSafeEqual } from "node:crypto";
import type { Http2Session } from "node:http2";
import type { Socket } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * The client a connection counts against, on both ports: an IPv4 address as
 * it is (also when it arrives IPv4-mapped, `::ffff:1.2.3.4`, as it does on a
 * dual-stack socket), an IPv6 address by its /64 (`2001:db8:0:1::/64`),
 * since one host usually holds a whole /64. Anything that is not an IP
 * address (undefined: the peer is already gone) is returned as it is.
 */
export function clientOf(remoteAddress: string | undefined): string | undefined {
  if (!remoteAddress || !ipaddr.isValid(remoteAddress)) return remoteAddress;
  const address = ipaddr.process(remoteAddress);
  if (address.kind() === "ipv4") return address.toString();
  return `${address.toNormalizedString().split(":").slice(0, 4).join(":")}::/64`;
}

const CLIENT: unique symbol = Symbol("client");
type Holder = { [CLIENT]?: string | undefined };

/** The client of a gateway connection (clientOf), worked out once per connection rather than once per request. */
export function clientOfSocket(socket: Socket | undefined): string | undefined {
  if (!socket) return undefined;
  const held = socket as Holder;
  return CLIENT in held ? held[CLIENT] : (held[CLIENT] = clientOf(socket.remoteAddress));
}

/**
 * The client of a gateway request: its connection's (clientOfSocket), or, when it came through a proxy that
 * TRUST_PROXY names, the address that proxy forwarded (Fastify's `request.ip` believes only trusted proxies).
 */
export function clientOfRequest(request: { readonly ip: string; readonly raw: { readonly socket: Socket } }): string | undefined {
  const socket = request.raw.socket;
  return request.ip === socket.remoteAddress ? clientOfSocket(socket) : clientOf(request.ip);
}

/** The same for an HTTP/2 session of the core port (kept on the session: its `socket` is a proxy). */
export function clientOfSession(session: Http2Session | undefined): string | undefined {
  if (!session) return undefined;
  const held = session as Holder;
  return CLIENT in held ? held[CLIENT] : (held[CLIENT] = clientOf(session.socket?.remoteAddress));
}

/**
 * A gateway in front of a remote core (CORE_URL) names its caller to the core
 * in this header, signed with URL_SIGNING_SECRET (which both share): the core
 * then counts failed credentials against that caller, not against the
 * gateway's own address. Unsigned or wrongly signed, it is ignored.
 */
export const FORWARDED_CLIENT_HEADER = "x-gateway-client";

const macOf = (client: string, secret: Buffer) => createHmac("sha256", secret).update(`client-address:${client}`).digest("base64url");

/** The header's value naming `client`: the client and its signature. */
export function forwardedClient(client: string, secret: Buffer): string {
  return `${client} ${macOf(client, secret)}`;
}

/**
 * The client of a call on the core port: the one a gateway holding the
 * secret names (forwardedClient), else the connection's own (clientOf).
 */
export function clientOfCall(session: Http2Session | undefined, headers: Headers, secret: Buffer): string | undefined {
  const forwarded = headers.get(FORWARDED_CLIENT_HEADER);
  if (forwarded !== null) {
    const [client = "", mac = ""] = forwarded.split(" ", 2);
    const expected = Buffer.from(macOf(client, secret));
    const given = Buffer.from(mac);
    if (given.length === expected.length && timingSafeEqual(given, expected)) return client;
  }
  return clientOfSession(session);
}

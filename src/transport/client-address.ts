import { createHmac, timingSafeEqual } from "node:crypto";
import type { Http2Session } from "node:http2";
import type { Socket } from "node:net";
import ipaddr from "ipaddr.js";

/** The client a connection counts against: an IPv4 address (also IPv4-mapped), an IPv6 one by its /64 (one host usually holds it). */
export function clientOf(remoteAddress: string | undefined): string | undefined {
  if (!remoteAddress || !ipaddr.isValid(remoteAddress)) return remoteAddress;
  const address = ipaddr.process(remoteAddress);
  if (address.kind() === "ipv4") return address.toString();
  return `${address.toNormalizedString().split(":").slice(0, 4).join(":")}::/64`;
}

const CLIENT: unique symbol = Symbol("client");

/** clientOf worked out once per connection (kept on a gateway socket, or an HTTP/2 session: its `socket` is a proxy). */
function clientOfConnection(holder: (Socket | Http2Session) & { [CLIENT]?: string | undefined }, address: () => string | undefined) {
  return CLIENT in holder ? holder[CLIENT] : (holder[CLIENT] = clientOf(address()));
}

/** A gateway request's client: its connection's, or the address a TRUST_PROXY proxy forwarded (Fastify's `request.ip`). */
export function clientOfRequest(request: { readonly ip: string; readonly raw: { readonly socket: Socket } }): string | undefined {
  const socket = request.raw.socket;
  return request.ip === socket.remoteAddress ? clientOfConnection(socket, () => socket.remoteAddress) : clientOf(request.ip);
}

/** A gateway in front of a remote core names its caller in this header, signed with URL_SIGNING_SECRET; otherwise ignored. */
export const FORWARDED_CLIENT_HEADER = "x-gateway-client";

const macOf = (client: string, secret: Buffer) => createHmac("sha256", secret).update(`client-address:${client}`).digest("base64url");

/** The header's value naming `client`: the client and its signature. */
export function forwardedClient(client: string, secret: Buffer): string {
  return `${client} ${macOf(client, secret)}`;
}

/** The client of a call on the core port: the one a gateway holding the secret names (`forwarded`), else the connection's own. */
export function clientOfCall(session: Http2Session | undefined, forwarded: unknown, secret: Buffer): string | undefined {
  if (typeof forwarded === "string") {
    const [client = "", mac = ""] = forwarded.split(" ", 2);
    const expected = Buffer.from(macOf(client, secret));
    const given = Buffer.from(mac);
    if (given.length === expected.length && timingSafeEqual(given, expected)) return client;
  }
  return session ? clientOfConnection(session, () => session.socket?.remoteAddress) : undefined;
}

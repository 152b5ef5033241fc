import ipaddr from "ipaddr.js";
import { lookup } from "node:dns";
import type { LookupFunction } from "node:net";

/**
 * Server-side request forgery guard for input-image fetches and webhooks:
 * only public unicast addresses are reachable unless private ones are allowed.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === "unicast";
}

export class BlockedAddressError extends Error {
  constructor(host: string, address: string) {
    super(`${host} resolves to ${address}, a private, loopback or link-local address`);
  }
}

/** A DNS lookup for http.request that refuses non-public answers, so a rebinding name cannot slip through. */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, "", 0);
      const list = addresses as unknown as { address: string; family: number }[];
      const blocked = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (blocked) return callback(new BlockedAddressError(hostname, blocked.address), "", 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: typeof list) => void)(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** Literal IPs skip DNS, so they are checked before connecting. */
export function checkLiteralHost(hostname: string, allowPrivate: boolean): void {
  const bare = hostname.replace(/^\[|\]$/g, "");
  if (!allowPrivate && ipaddr.isValid(bare) && !isPublicAddress(bare)) throw new BlockedAddressError(hostname, bare);
}

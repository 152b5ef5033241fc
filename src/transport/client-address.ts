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

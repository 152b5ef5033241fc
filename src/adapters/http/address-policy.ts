import ipaddr from "ipaddr.js";
import { isIP } from "node:net";

/**
 * Server-side request forgery guard for client-supplied URLs (input images,
 * webhooks, foreign video links): only globally reachable unicast addresses
 * may be connected to unless ALLOW_PRIVATE_URLS is set.
 */

/** How an address inside a block is judged. */
export type Judgement =
  /** Refused, whatever more specific entry the registry has inside the block. */
  | "refuse"
  /** The block carries an IPv4 address (mapped, translated, tunnelled): that address is judged instead. */
  | "embedded-ipv4";

export interface SpecialBlock {
  readonly block: string;
  readonly name: string;
  readonly rfc: string;
  readonly judge: Judgement;
  /** Where the entry comes from. */
  readonly source: "iana-ipv4-special" | "iana-ipv6-special" | "other";
}

const ipv4 = (block: string, name: string, rfc: string): SpecialBlock => ({ block, name, rfc, judge: "refuse", source: "iana-ipv4-special" });
const ipv6 = (block: string, name: string, rfc: string, judge: Judgement = "refuse"): SpecialBlock => ({ block, name, rfc, judge, source: "iana-ipv6-special" });
const other = (block: string, name: string, rfc: string): SpecialBlock => ({ block, name, rfc, judge: "refuse", source: "other" });

/**
 * Every entry of the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * whose "Globally Reachable" is False or N/A, plus blocks outside those
 * registries that no public web server uses. A globally reachable entry
 * nested in a refused block (192.0.0.9/32 PCP anycast, 192.0.0.10/32 TURN
 * anycast, 2001:1::1/128 and its neighbours, AMT, AS112-v6, ORCHIDv2, DETs
 * inside 2001::/23) stays refused: these are anycast services and overlay
 * identifiers, and an anycast address reaches whatever relay is nearest,
 * possibly inside the operator's network. 64:ff9b::/96 is globally reachable
 * and the IPv4-mapped and 6to4 blocks stand for an IPv4 destination: those
 * three are judged by the IPv4 address they carry. IPv6 outside 2000::/3
 * (the only block allocated for global unicast) is refused too.
 */
export const NOT_GLOBALLY_REACHABLE: readonly SpecialBlock[] = [
  // IANA IPv4 Special-Purpose Address Registry
  ipv4("0.0.0.0/8", '"This network"', "RFC 791, section 3.2"),
  ipv4("0.0.0.0/32", '"This host on this network"', "RFC 1122, section 3.2.1.3"),
  ipv4("10.0.0.0/8", "Private-Use", "RFC 1918"),
  ipv4("100.64.0.0/10", "Shared Address Space", "RFC 6598"),
  ipv4("127.0.0.0/8", "Loopback", "RFC 1122, section 3.2.1.3"),
  ipv4("169.254.0.0/16", "Link Local", "RFC 3927"),
  ipv4("172.16.0.0/12", "Private-Use", "RFC 1918"),
  ipv4("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890, section 2.1"),
  ipv4("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335"),
  ipv4("192.0.0.8/32", "IPv4 dummy address", "RFC 7600"),
  ipv4("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 section 2.2"),
  ipv4("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 section 2.2"),
  ipv4("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737"),
  ipv4("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526"),
  ipv4("192.168.0.0/16", "Private-Use", "RFC 1918"),
  ipv4("198.18.0.0/15", "Benchmarking", "RFC 2544"),
  ipv4("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737"),
  ipv4("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737"),
  ipv4("240.0.0.0/4", "Reserved", "RFC 1112, section 4"),
  ipv4("255.255.255.255/32", "Limited Broadcast", "RFC 8190, RFC 919 section 7"),
  // IANA IPv6 Special-Purpose Address Registry
  ipv6("::1/128", "Loopback Address", "RFC 4291"),
  ipv6("::/128", "Unspecified Address", "RFC 4291"),
  ipv6("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", "embedded-ipv4"),
  ipv6("64:ff9b::/96", "IPv4-IPv6 Translat. (globally reachable; judged by the IPv4 address)", "RFC 6052", "embedded-ipv4"),
  ipv6("64:ff9b:1::/48", "IPv4-IPv6 Translat. (local use)", "RFC 8215"),
  ipv6("100::/64", "Discard-Only Address Block", "RFC 6666"),
  ipv6("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780"),
  ipv6("2001::/23", "IETF Protocol Assignments", "RFC 2928"),
  ipv6("2001::/32", "TEREDO", "RFC 4380, RFC 8190"),
  ipv6("2001:2::/48", "Benchmarking", "RFC 5180"),
  ipv6("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843"),
  ipv6("2001:db8::/32", "Documentation", "RFC 3849"),
  ipv6("2002::/16", "6to4 (judged by the IPv4 address)", "RFC 3056", "embedded-ipv4"),
  ipv6("3fff::/20", "Documentation", "RFC 9637"),
  ipv6("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602"),
  ipv6("fc00::/7", "Unique-Local", "RFC 4193, RFC 8190"),
  ipv6("fe80::/10", "Link-Local Unicast", "RFC 4291"),
  // Outside the special-purpose registries
  other("224.0.0.0/4", "IPv4 multicast", "RFC 5771"),
  other("::/96", "IPv4-compatible IPv6 address (deprecated)", "RFC 4291, section 2.5.5.1"),
  other("::ffff:0:0:0/96", "IPv4-translated address (SIIT)", "RFC 2765, section 2.1"),
  other("fec0::/10", "Site-local unicast (deprecated)", "RFC 3879"),
  other("ff00::/8", "IPv6 multicast", "RFC 4291, section 2.7"),
];

type Parsed = ipaddr.IPv4 | ipaddr.IPv6;

const TABLE = NOT_GLOBALLY_REACHABLE.map((row) => ({ row, range: ipaddr.parseCIDR(row.block) }));
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR("2000::/3");

/**
 * ipaddr.js reads "::a.b.c.d" as the IPv4-mapped "::ffff:a.b.c.d"; resolvers
 * print IPv4-compatible answers in that form. Rewriting a dotted tail into two
 * hex groups first keeps the two apart.
 */
function parse(text: string): Parsed | undefined {
  let value = text;
  if (value.includes(":")) {
    const tail = /^(.*:)(\d+\.\d+\.\d+\.\d+)(%.*)?$/.exec(value);
    if (tail) {
      if (!ipaddr.IPv4.isValidFourPartDecimal(tail[2]!)) return undefined;
      const [a, b, c, d] = ipaddr.IPv4.parse(tail[2]!).octets as [number, number, number, number];
      value = `${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}${tail[3] ?? ""}`;
    }
    return ipaddr.IPv6.isValid(value) ? ipaddr.IPv6.parse(value) : undefined;
  }
  // Only the four-part dotted form: other spellings (hex, octal, short) never come from a resolver or the URL parser.
  return ipaddr.IPv4.isValidFourPartDecimal(value) ? ipaddr.IPv4.parse(value) : undefined;
}

/** The IPv4 address an IPv6 address of an "embedded-ipv4" block stands for. */
function embeddedIpv4(address: ipaddr.IPv6, block: string): ipaddr.IPv4 {
  const bytes = address.toByteArray();
  // 6to4 (RFC 3056, section 2): 2002:V4ADDR::/48. The others carry it in the last 32 bits.
  const at = block === "2002::/16" ? 2 : 12;
  return new ipaddr.IPv4(bytes.slice(at, at + 4));
}

function judge(address: Parsed): boolean {
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).zoneId !== undefined) return false; // only scoped addresses need one
  const inside = TABLE.filter(({ range }) => address.kind() === range[0].kind() && address.match(range)).map(({ row }) => row);
  if (inside.some((row) => row.judge === "refuse")) return false;
  const carrier = inside.find((row) => row.judge === "embedded-ipv4");
  if (carrier) return judge(embeddedIpv4(address as ipaddr.IPv6, carrier.block));
  return address.kind() === "ipv4" || address.match(GLOBAL_UNICAST_V6);
}

/** True for a globally reachable unicast address; false for anything else, including text that is no address. */
export function isPublicAddress(text: string): boolean {
  const address = parse(text);
  return address !== undefined && judge(address);
}

/** A literal IP host (URL hostnames keep IPv6 in brackets); undefined for a name. */
export function literalAddress(hostname: string): string | undefined {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  return isIP(bare) !== 0 || ipaddr.isValid(bare) ? bare : undefined;
}

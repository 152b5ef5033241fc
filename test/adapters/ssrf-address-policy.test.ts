// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isPublicAddress, NOT_GLOBALLY_REACHABLE } from "../../src/adapters/http/address-policy.js";
import { guardedRequest, GuardedRequestError, type Resolve } from "../../src/adapters/http/guarded-request.js";

/*
 * The outbound-request guard (input images, webhooks, foreign video links)
 * against the IANA IPv4 and IPv6 Special-Purpose Address Registries, written
 * out here independently of the code's table: every block the registries
 * mark not globally reachable, plus the ones the guard refuses on top
 * (multicast, IPv4-compatible and IPv4-translated IPv6, site-local), and the
 * three blocks judged by the IPv4 address they embed (IPv4-mapped, NAT64's
 * well-known prefix, 6to4). Each address is tried twice with private
 * addresses not allowed: as a literal URL and as the DNS answer for a name.
 */

interface Row {
  readonly block: string;
  readonly rfc: string;
  /** Addresses inside the block that must be refused (first, last, and a telling one). */
  readonly inside: readonly string[];
}

const IPV4_REGISTRY: readonly Row[] = [
  { block: "0.0.0.0/8", rfc: "RFC 791", inside: ["0.0.0.1", "0.255.255.255"] },
  { block: "0.0.0.0/32", rfc: "RFC 1122", inside: ["0.0.0.0"] },
  { block: "10.0.0.0/8", rfc: "RFC 1918", inside: ["10.0.0.0", "10.255.255.255"] },
  { block: "100.64.0.0/10", rfc: "RFC 6598", inside: ["100.64.0.0", "100.127.255.255"] },
  { block: "127.0.0.0/8", rfc: "RFC 1122", inside: ["127.0.0.1", "127.255.255.255"] },
  { block: "169.254.0.0/16", rfc: "RFC 3927", inside: ["169.254.0.0", "169.254.169.254", "169.254.255.255"] },
  { block: "172.16.0.0/12", rfc: "RFC 1918", inside: ["172.16.0.0", "172.31.255.255"] },
  { block: "192.0.0.0/24", rfc: "RFC 6890", inside: ["192.0.0.0", "192.0.0.9", "192.0.0.255"] },
  { block: "192.0.0.0/29", rfc: "RFC 7335", inside: ["192.0.0.1", "192.0.0.7"] },
  { block: "192.0.0.8/32", rfc: "RFC 7600", inside: ["192.0.0.8"] },
  { block: "192.0.0.170/32", rfc: "RFC 8880", inside: ["192.0.0.170"] },
  { block: "192.0.0.171/32", rfc: "RFC 8880", inside: ["192.0.0.171"] },
  { block: "192.0.2.0/24", rfc: "RFC 5737", inside: ["192.0.2.0", "192.0.2.255"] },
  { block: "192.88.99.0/24", rfc: "RFC 7526", inside: ["192.88.99.0", "192.88.99.255"] },
  { block: "192.168.0.0/16", rfc: "RFC 1918", inside: ["192.168.0.0", "192.168.255.255"] },
  { block: "198.18.0.0/15", rfc: "RFC 2544", inside: ["198.18.0.0", "198.19.255.255"] },
  { block: "198.51.100.0/24", rfc: "RFC 5737", inside: ["198.51.100.0", "198.51.100.255"] },
  { block: "203.0.113.0/24", rfc: "RFC 5737", inside: ["203.0.113.0", "203.0.113.255"] },
  { block: "240.0.0.0/4", rfc: "RFC 1112", inside: ["240.0.0.0", "255.255.255.254"] },
  { block: "255.255.255.255/32", rfc: "RFC 8190", inside: ["255.255.255.255"] },
];

const IPV6_REGISTRY: readonly Row[] = [
  { block: "::1/128", rfc: "RFC 4291", inside: ["::1"] },
  { block: "::/128", rfc: "RFC 4291", inside: ["::"] },
  { block: "64:ff9b:1::/48", rfc: "RFC 8215", inside: ["64:ff9b:1::", "64:ff9b:1::808:808", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"] },
  { block: "100::/64", rfc: "RFC 6666", inside: ["100::", "100::ffff:ffff:ffff:ffff"] },
  { block: "100:0:0:1::/64", rfc: "RFC 9780", inside: ["100:0:0:1::", "100:0:0:1:ffff:ffff:ffff:ffff"] },
  { block: "2001::/23", rfc: "RFC 2928", inside: ["2001::", "2001:1::1", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "2001::/32", rfc: "RFC 4380", inside: ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "2001:2::/48", rfc: "RFC 5180", inside: ["2001:2::", "2001:2:0:ffff:ffff:ffff:ffff:ffff"] },
  { block: "2001:10::/28", rfc: "RFC 4843", inside: ["2001:10::", "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "2001:db8::/32", rfc: "RFC 3849", inside: ["2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "3fff::/20", rfc: "RFC 9637", inside: ["3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "5f00::/16", rfc: "RFC 9602", inside: ["5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "fc00::/7", rfc: "RFC 4193", inside: ["fc00::", "fd12:3456:789a::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "fe80::/10", rfc: "RFC 4291", inside: ["fe80::1", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] },
];

/** Not (or no longer) in the special-purpose registries, refused all the same. */
const ALSO_REFUSED: readonly Row[] = [
  { block: "224.0.0.0/4", rfc: "RFC 5771", inside: ["224.0.0.1", "239.255.255.255"] },
  // IPv4-compatible IPv6 (deprecated): whatever it embeds, private or public.
  { block: "::/96", rfc: "RFC 4291", inside: ["::7f00:1", "::127.0.0.1", "::a00:1", "::808:808", "::8.8.8.8", "::ffff:ffff"] },
  { block: "::ffff:0:0:0/96", rfc: "RFC 2765", inside: ["::ffff:0:7f00:1", "::ffff:0:808:808"] },
  { block: "fec0::/10", rfc: "RFC 3879", inside: ["fec0::1", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] },
  { block: "ff00::/8", rfc: "RFC 4291", inside: ["ff02::1", "ff0e::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] },
];

/** Judged by the IPv4 address inside: refused when that one is, allowed when it is public. */
const EMBEDDED: readonly (Row & { readonly publicInside: readonly string[] })[] = [
  {
    block: "::ffff:0:0/96", rfc: "RFC 4291",
    inside: ["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "0:0:0:0:0:ffff:c0a8:101"],
    publicInside: ["::ffff:8.8.8.8", "::ffff:808:808"],
  },
  {
    block: "64:ff9b::/96", rfc: "RFC 6052",
    inside: ["64:ff9b::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:1"],
    publicInside: ["64:ff9b::8.8.8.8", "64:ff9b::808:808"],
  },
  {
    block: "2002::/16", rfc: "RFC 3056",
    inside: ["2002:7f00:1::", "2002:7f00:1::1", "2002:a00:1::1", "2002:a9fe:a9fe:1::1", "2002:c0a8:101::", "2002::1"],
    publicInside: ["2002:808:808::1"],
  },
];

const PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "192.0.1.255", "192.0.3.0", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "2001:200::1"];

const urlOf = (address: string, port = 80) => `http://${address.includes(":") ? `[${address}]` : address}:${port}/probe.png`;

/** A resolver that answers `answers` for every name (what a hostile DNS server can do), counting its calls. */
function resolverAnswering(answers: readonly string[]): Resolve & { calls: number } {
  const resolve = Object.assign(
    async () => {
      resolve.calls++;
      return answers.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    },
    { calls: 0 },
  );
  return resolve;
}

async function refusal(target: string, options: { resolve?: Resolve; allowPrivate?: boolean } = {}): Promise<GuardedRequestError> {
  const error = await guardedRequest(target, {
    method: "GET", timeoutMs: 2_000, maxBytes: 1024, allowPrivate: options.allowPrivate ?? false, resolve: options.resolve,
  }).then(
    (response) => assert.fail(`${target} was fetched (HTTP ${response.status}) instead of refused`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof GuardedRequestError, `${target}: expected a GuardedRequestError, got ${String(error)}`);
  return error;
}

async function assertRefusedAddress(address: string): Promise<void> {
  const literal = await refusal(urlOf(address));
  assert.equal(literal.failure, "blocked", `${address} as a literal: ${literal.detail}`);
  assert.equal(literal.message, "the address is not allowed");
  const resolve = resolverAnswering([address]);
  const named = await refusal("http://images.example/probe.png", { resolve });
  assert.equal(named.failure, "blocked", `${address} as a DNS answer: ${named.detail}`);
  assert.equal(named.message, "the address is not allowed");
  assert.equal(resolve.calls, 1);
}

describe("SSRF guard: every not-globally-reachable block of the IANA special-purpose registries", () => {
  for (const [registry, rows] of [["IPv4", IPV4_REGISTRY], ["IPv6", IPV6_REGISTRY], ["outside the registries", ALSO_REFUSED]] as const) {
    for (const row of rows) {
      it(`when an address is inside ${row.block} (${registry}, ${row.rfc}), then it is refused as a literal and as a DNS answer`, async () => {
        for (const address of row.inside) await assertRefusedAddress(address);
      });
    }
  }

  for (const row of EMBEDDED) {
    it(`when an address inside ${row.block} (${row.rfc}) embeds a refused IPv4 address, then it is refused`, async () => {
      for (const address of row.inside) await assertRefusedAddress(address);
    });
    it(`when an address inside ${row.block} embeds a public IPv4 address, then it counts as public`, () => {
      for (const address of row.publicInside) assert.equal(isPublicAddress(address), true, address);
    });
  }

  it("when an address is globally reachable unicast, then it counts as public", () => {
    for (const address of PUBLIC) assert.equal(isPublicAddress(address), true, address);
  });

  it("when the code's table is read, then every row names its block, its RFC and how it is judged, and every block above is in it", () => {
    for (const row of NOT_GLOBALLY_REACHABLE) {
      assert.match(row.rfc, /^RFC \d+/, row.block);
      assert.ok(row.name.length > 0, row.block);
      assert.ok(["refuse", "embedded-ipv4"].includes(row.judge), row.block);
    }
    const blocks = new Set(NOT_GLOBALLY_REACHABLE.map((row) => row.block));
    for (const row of [...IPV4_REGISTRY, ...IPV6_REGISTRY, ...ALSO_REFUSED, ...EMBEDDED]) assert.ok(blocks.has(row.block), `${row.block} is not in the table`);
  });

  it("when an address carries a zone id, then it is refused whatever the address", async () => {
    for (const address of ["fe80::1%eth0", "fe80::1%1", "2606:4700:4700::1111%eth0"]) assert.equal(isPublicAddress(address), false, address);
    const named = await refusal("http://images.example/probe.png", { resolve: resolverAnswering(["2606:4700:4700::1111%eth0"]) });
    assert.equal(named.failure, "blocked");
  });

  it("when the text is no address at all, then it is refused", () => {
    for (const text of ["", "localhost", "256.0.0.1", "::g", "1.2.3.4.5"]) assert.equal(isPublicAddress(text), false, text);
  });
});

describe("SSRF guard: literal forms and names of a loopback server", () => {
  let server: Server;
  let port: number;
  const hits: string[] = [];
  before(async () => {
    server = createServer((request, response) => {
      hits.push(request.url ?? "");
      response.writeHead(200, { "content-type": "image/png" }).end("png");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));

  /** Forms the URL parser turns into 127.0.0.1 (or an IPv6 spelling of it): each reaches the server when private addresses are allowed. */
  const LOOPBACK_SPELLINGS = ["2130706433", "0x7f.1", "0x7f000001", "017700000001", "0177.0.0.1", "127.1", "127.0.1", "0", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]"];

  it("when a decimal, octal, hex, short or IPv4-mapped spelling of loopback is the host, then it is refused and nothing is fetched", async () => {
    for (const host of [...LOOPBACK_SPELLINGS, "[::7f00:1]", "[::127.0.0.1]", "[::1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]"]) {
      const error = await refusal(`http://${host}:${port}/literal`);
      assert.equal(error.failure, "blocked", `${host}: ${error.detail}`);
    }
    assert.deepEqual(hits, []);
  });

  it("when the same spellings are used with private addresses allowed, then they do reach the loopback server (so the refusal above is the guard's)", async () => {
    const before = hits.length;
    for (const host of LOOPBACK_SPELLINGS) {
      const response = await guardedRequest(`http://${host}:${port}/allowed`, { method: "GET", timeoutMs: 2_000, maxBytes: 1024, allowPrivate: true });
      assert.equal(response.status, 200, host);
    }
    assert.equal(hits.length - before, LOOPBACK_SPELLINGS.length);
  });

  it("when the host is an IPv6 literal with a zone id, then it is refused and nothing is fetched", async () => {
    const before = hits.length;
    for (const host of ["[fe80::1%25lo]", "[::1%25lo]", "[fe80::1%lo]"]) {
      const error = await refusal(`http://${host}:${port}/zone`);
      assert.ok(["blocked", "invalid_url"].includes(error.failure), `${host}: ${error.failure}`);
    }
    assert.equal(hits.length, before);
  });

  it("when a name resolves to loopback through the system resolver (localhost), then it is refused at connect time", async () => {
    const before = hits.length;
    const error = await refusal(`http://localhost:${port}/named`);
    assert.equal(error.failure, "blocked", error.detail);
    assert.equal(hits.length, before);
  });

  it("when a name answers a public and a private address, then it is refused (any answer may be the one connected to)", async () => {
    const error = await refusal("http://mixed.example/probe.png", { resolve: resolverAnswering(["93.184.216.34", "127.0.0.1"]) });
    assert.equal(error.failure, "blocked");
    const v6 = await refusal("http://mixed.example/probe.png", { resolve: resolverAnswering(["2606:4700:4700::1111", "::7f00:1"]) });
    assert.equal(v6.failure, "blocked");
  });

  it("when a name is resolved, then the connection goes to exactly the answer the guard checked, asked afresh for every request (no rebinding window)", async () => {
    const resolve = resolverAnswering(["127.0.0.1"]);
    const before = hits.length;
    for (const path of ["/first", "/second"]) {
      const response = await guardedRequest(`http://rebind.example:${port}${path}`, { method: "GET", timeoutMs: 2_000, maxBytes: 1024, allowPrivate: true, resolve });
      assert.equal(response.status, 200);
    }
    assert.equal(resolve.calls, 2, "the name is looked up by the connection itself, once per request");
    assert.deepEqual(hits.slice(before), ["/first", "/second"]);
    // The same resolver, now judged: the answer the connection would use is the one refused.
    const refused = await refusal(`http://rebind.example:${port}/third`, { resolve });
    assert.equal(refused.failure, "blocked");
    assert.equal(resolve.calls, 3);
    assert.deepEqual(hits.slice(before), ["/first", "/second"]);
  });
});

// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { once } from "node:events";
import { clientOf } from "../../src/transport/client-address.js";
import { DEFAULT_RPC_EDGE, listenRpc } from "../../src/transport/rpc/rpc-server.js";
import { eventually, startTestService, type TestService } from "../support/harness.js";

describe("clientOf: the client a connection counts against, on both ports", () => {
  it("when an IPv4 address arrives IPv4-mapped, then it counts as the plain IPv4 address", () => {
    assert.equal(clientOf("::ffff:203.0.113.7"), "203.0.113.7");
    assert.equal(clientOf("::ffff:cb00:7107"), "203.0.113.7", "the hexadecimal spelling of the same mapped address");
    assert.equal(clientOf("::FFFF:127.0.0.2"), "127.0.0.2");
  });

  it("when an address is plain IPv4, then it counts as itself", () => {
    assert.equal(clientOf("203.0.113.7"), "203.0.113.7");
    assert.equal(clientOf("127.0.0.1"), "127.0.0.1");
    assert.notEqual(clientOf("203.0.113.7"), clientOf("203.0.113.8"), "two IPv4 hosts are two clients");
  });

  it("when addresses are IPv6, then they count by their /64: one client per /64, another /64 another client", () => {
    assert.equal(clientOf("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
    assert.equal(clientOf("2001:db8:1:2::ffff"), "2001:db8:1:2::/64", "another host of the same /64");
    assert.equal(clientOf("2001:0DB8:0001:0002:0000:0000:0000:0001"), "2001:db8:1:2::/64", "any spelling of it");
    assert.equal(clientOf("2001:db8:1:3::1"), "2001:db8:1:3::/64", "the next /64 is another client");
    assert.equal(clientOf("fe80::1%eth0"), "fe80:0:0:0::/64", "a zone id does not make another client");
    assert.equal(clientOf("::1"), "0:0:0:0::/64");
  });

  it("when there is no address (the peer is already gone) or it is not an IP address, then it is returned as it is", () => {
    assert.equal(clientOf(undefined), undefined);
    assert.equal(clientOf(""), "");
    assert.equal(clientOf("not-an-address"), "not-an-address");
  });
});

describe("the core port's per-client cap on a dual-stack socket", () => {
  let service: TestService;
  let rpc: Awaited<ReturnType<typeof listenRpc>>;
  const debugLines: { message: string; facts?: Record<string, unknown> }[] = [];
  before(async () => {
    service = await startTestService();
    // Bound to "::", IPv4 clients arrive IPv4-mapped (::ffff:127.0.0.2).
    rpc = await listenRpc(service.running.core!, "::", 0, () => {}, service.running.readiness, {
      ...DEFAULT_RPC_EDGE,
      edge: { ...DEFAULT_RPC_EDGE.edge, maxConnectionsPerClient: 2 },
      debugLog: (message, facts) => debugLines.push({ message, facts }),
    });
  });
  after(async () => {
    await rpc?.close();
    await service?.close();
  });

  /** A TCP connection to the core port over IPv4 from `localAddress`; `closed` turns true when the server closes it. */
  async function connectFrom(localAddress: string) {
    const socket = net.connect({ host: "127.0.0.1", port: rpc.port, localAddress });
    const state = { closed: false };
    socket.on("error", () => {});
    socket.on("close", () => (state.closed = true));
    await once(socket, "connect");
    return { socket, state };
  }

  it("when an IPv4 client over its cap arrives IPv4-mapped, then it is refused and counted as its plain IPv4 address, the gateway's key", async () => {
    const held = [await connectFrom("127.0.0.2"), await connectFrom("127.0.0.2")];
    const other = await connectFrom("127.0.0.1");
    try {
      const over = await connectFrom("127.0.0.2");
      await eventually(async () => over.state.closed, Boolean, { timeoutMs: 5_000, what: "the third connection of 127.0.0.2 to be closed" });
      const refusals = await eventually(
        async () => debugLines.filter((line) => line.message.includes("MAX_CONNECTIONS_PER_CLIENT")),
        (lines) => lines.length === 1,
        { timeoutMs: 5_000, what: "the refusal's debug line" },
      );
      assert.deepEqual(refusals[0]!.facts, { client: clientOf("::ffff:127.0.0.2") });
      assert.equal(refusals[0]!.facts?.client, "127.0.0.2");
      assert.ok(!held.some((h) => h.state.closed) && !other.state.closed, "the connections within their caps stay open");
    } finally {
      for (const connection of [...held, other]) connection.socket.destroy();
    }
  });
});

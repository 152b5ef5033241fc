/**
 * A process that moves one account's money on Cassandra without pause, for
 * tests that kill it mid-round: CALLERS loops of reserve-then-settle (or
 * release, every third) through a CassandraLedger of its own session. Prints
 * `moving` once its first pair is done, and runs until it is killed.
 *
 * Environment: CASSANDRA_CONTACT_POINTS, CASSANDRA_KEYSPACE (migrated), ACCOUNT_ID, CALLERS.
 */
import { randomUUID } from "node:crypto";
import { CassandraLedger } from "../../src/adapters/cassandra/ledger/cassandra-ledger.js";
import { openSession } from "../../src/adapters/cassandra/cassandra-session.js";

const session = await openSession({
  contactPoints: process.env.CASSANDRA_CONTACT_POINTS!.split(","), keyspace: process.env.CASSANDRA_KEYSPACE!, localDataCenter: "datacenter1",
  replication: { strategy: "SimpleStrategy", factor: 1 },
});
const ledger = new CassandraLedger(session);
const accountId = process.env.ACCOUNT_ID!;
let told = false;
await Promise.all(
  Array.from({ length: Number(process.env.CALLERS) }, async (_, caller) => {
    for (let i = 0; ; i++) {
      const id = `job:${caller}-${i}-${randomUUID()}`;
      if ((await ledger.reserve(accountId, id, 3n, { memo: { jobId: id, model: "m" } })) !== "reserved") continue;
      if (i % 3 === 2) await ledger.release(accountId, id);
      else await ledger.settle(accountId, id, 2n);
      if (!told) {
        told = true;
        process.stdout.write("moving\n");
      }
    }
  }),
);

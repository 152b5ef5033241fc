/**
 * One writer process of bench/hot-account.ts: closed loops against one
 * account's money on Cassandra, started at an agreed moment so that several
 * such processes load the account together. Prints one JSON line with what it
 * measured (successes and their latencies inside the window, other outcomes,
 * its own CPU) and exits.
 *
 * Environment: WRITER_MODE (`ledger`: reserve-and-release pairs through
 * CassandraLedger; `cas`: the bare baseline, one `UPDATE … IF v = ?` on one row
 * per operation, retried with the value a lost round answers until applied),
 * CASSANDRA_CONTACT_POINTS, CASSANDRA_KEYSPACE (migrated already), ACCOUNT_ID,
 * CALLERS, WARMUP_MS, DURATION_MS, and START_AT (epoch ms the measured window opens) or, without it,
 * the handshake: the process prints `ready` once it can write, then reads that moment from a line of stdin
 * (the parent sends it once every writer is ready, so a slow start-up never shortens a window).
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import cassandra from "cassandra-driver";
import { CassandraLedger } from "../src/adapters/cassandra/ledger/cassandra-ledger.js";
import type { Telemetry } from "../src/ports/telemetry.js";
import { openSession } from "../src/adapters/cassandra/cassandra-session.js";
import { closedLoop } from "./load-kit.js";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};
const mode = env("WRITER_MODE");
const contactPoints = env("CASSANDRA_CONTACT_POINTS").split(",");
const keyspace = env("CASSANDRA_KEYSPACE");
const accountId = env("ACCOUNT_ID");
const callers = Number(env("CALLERS"));
const warmupMs = Number(env("WARMUP_MS"));
const durationMs = Number(env("DURATION_MS"));
/** The price of one image job (0.039 in pico-units): what each reservation holds. */
const AMOUNT = 39_000_000_000n;

type Operation = (caller: number) => Promise<string>;

/** The rounds this process's ledger committed in the measured window: how many, the operations they carried, their time. */
const rounds = { count: 0, operations: 0, seconds: 0 };
let window = { from: Infinity, to: Infinity };
const roundTelemetry: Telemetry = {
  observe(observation) {
    const now = Date.now();
    if (observation.kind !== "ledger_round" || now < window.from || now >= window.to) return;
    rounds.count++;
    rounds.operations += observation.operations;
    rounds.seconds += observation.seconds;
  },
};

async function ledgerOperation(): Promise<{ op: Operation; close: () => Promise<void> }> {
  const session = await openSession({ contactPoints, keyspace, localDataCenter: "datacenter1", replication: { strategy: "SimpleStrategy", factor: 1 } });
  const ledger = new CassandraLedger(session, Date.now, roundTelemetry);
  return {
    op: async () => {
      const id = `job:${randomUUID()}`;
      const outcome = await ledger.reserve(accountId, id, AMOUNT);
      if (outcome !== "reserved") return typeof outcome === "string" ? outcome : "key_limit";
      await ledger.release(accountId, id);
      return "ok";
    },
    close: () => session.shutdown(),
  };
}

async function casOperation(): Promise<{ op: Operation; close: () => Promise<void> }> {
  const client = new cassandra.Client({ contactPoints, localDataCenter: "datacenter1", keyspace, encoding: { useBigIntAsLong: true } });
  await client.connect();
  const seen: bigint[] = [];
  const serial = { prepare: true, consistency: cassandra.types.consistencies.localQuorum, serialConsistency: cassandra.types.consistencies.serial };
  return {
    // Each caller keeps the value it last saw (read once): an applied round knows what it wrote, and a lost
    // round answers the value that won. No read per operation, as the ledger makes none.
    op: async (caller: number) => {
      let current = seen[caller] ??= (await client.execute("SELECT v FROM bench_cas WHERE id = ?", [accountId], { ...serial, consistency: cassandra.types.consistencies.serial })).first()?.v as bigint;
      for (;;) {
        const result = await client.execute("UPDATE bench_cas SET v = ? WHERE id = ? IF v = ?", [current + 1n, accountId, current], serial);
        if (result.wasApplied()) {
          seen[caller] = current + 1n;
          return "ok";
        }
        current = seen[caller] = result.first().v as bigint;
      }
    },
    close: () => client.shutdown(),
  };
}

const { op, close } = mode === "cas" ? await casOperation() : await ledgerOperation();
const startAt = process.env.START_AT ? Number(process.env.START_AT) : await startFromParent();

/** Says `ready` and waits for the parent's line with the moment the window opens. */
async function startFromParent(): Promise<number> {
  process.stdout.write("ready\n");
  let input = "";
  for await (const chunk of process.stdin) {
    input += chunk;
    if (input.includes("\n")) break;
  }
  return Number(input.trim());
}
// Every writer process starts its warm-up at the agreed moment, so their measured windows coincide.
const begin = startAt - warmupMs;
if (begin > Date.now()) await sleep(begin - Date.now());
const windowStart = Date.now() + warmupMs;
window = { from: windowStart, to: windowStart + durationMs };
const result = await closedLoop(`${mode}, ${callers} callers`, callers, op, warmupMs, durationMs);
// Cores this process and the whole machine used in the window (Cassandra is most of the rest).
const cores = { self: result.cores["bench client"], machine: result.cores["machine total"] };
const line = JSON.stringify({ outcomes: result.outcomes, latencies: [...result.latencies], errors: result.errorSamples, windowStart, cores, rounds });
// A pipe's write is asynchronous: the process exits once the line is out, not before.
await new Promise<void>((resolve) => process.stdout.write(`${line}\n`, () => resolve()));
await close();
process.exit(0);

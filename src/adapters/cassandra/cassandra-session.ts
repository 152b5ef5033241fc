import cassandra from "cassandra-driver";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CassandraConfig } from "../../config/config.js";

const { Client, types, errors } = cassandra;
export type CassandraClient = InstanceType<typeof Client>;
export type Row = cassandra.types.Row;

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), "migrations");

/**
 * Writes commit at LOCAL_QUORUM and run Paxos at LOCAL_SERIAL; money-deciding
 * reads ask for LOCAL_SERIAL themselves. Varints and bigints map to BigInt.
 */
function clientOptions(config: CassandraConfig, keyspace?: string): cassandra.ClientOptions {
  return {
    contactPoints: [...config.contactPoints],
    localDataCenter: config.localDataCenter,
    keyspace,
    encoding: { useBigIntAsVarint: true, useBigIntAsLong: true },
    queryOptions: {
      prepare: true,
      consistency: types.consistencies.localQuorum,
      serialConsistency: types.consistencies.localSerial,
    },
    // Above the server's cas_contention_timeout + write_request_timeout, so the
    // client never gives up on a write the server may still commit.
    socketOptions: { readTimeout: 15_000, connectTimeout: 10_000 },
  };
}

/** Creates the keyspace, applies pending migrations in order, and returns a client bound to the keyspace. */
export async function openSession(config: CassandraConfig): Promise<CassandraClient> {
  if (!/^[a-z][a-z0-9_]{0,47}$/.test(config.keyspace)) throw new Error(`invalid keyspace name "${config.keyspace}"`);
  const bootstrap = new Client(clientOptions(config));
  try {
    await bootstrap.execute(`CREATE KEYSPACE IF NOT EXISTS ${config.keyspace} WITH replication = ${config.replication}`);
  } finally {
    await bootstrap.shutdown();
  }
  const client = new Client(clientOptions(config, config.keyspace));
  try {
    await migrate(client);
  } catch (error) {
    await client.shutdown();
    throw error;
  }
  return client;
}

/** Versioned CQL files (NNNN_name.cql), each applied once; every statement is idempotent, so two processes may race safely. */
async function migrate(client: CassandraClient): Promise<void> {
  await client.execute(
    "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text, applied_at timestamp)",
  );
  const applied = new Set((await client.execute("SELECT version FROM schema_migrations")).rows.map((r) => r.version as number));
  const files = (await readdir(MIGRATIONS)).filter((f) => /^\d{4}_.+\.cql$/.test(f)).sort();
  for (const file of files) {
    const version = Number(file.slice(0, 4));
    if (applied.has(version)) continue;
    const text = await readFile(join(MIGRATIONS, file), "utf8");
    const statements = text
      .split("\n")
      .filter((line) => !line.trim().startsWith("--"))
      .join("\n")
      .split(";")
      .map((s) => s.trim())
      .filter(Boolean);
    for (const statement of statements) await client.execute(statement, [], { prepare: false });
    await client.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?) IF NOT EXISTS", [
      version, file, new Date(),
    ]);
  }
}

/** A conditional write whose outcome is unknown: resolve by reading, never by applying again. */
export class AmbiguousWriteError extends Error {}

export function isAmbiguous(error: unknown): boolean {
  return (
    (error instanceof errors.ResponseError && error.code === types.responseErrorCodes.writeTimeout) ||
    error instanceof errors.OperationTimedOutError ||
    error instanceof errors.NoHostAvailableError
  );
}

export interface ConditionalResult {
  readonly applied: boolean;
  /** On failure, the current values of the condition's columns (or the whole row for IF NOT EXISTS). */
  readonly current?: Row;
}

/** Runs a lightweight transaction; throws AmbiguousWriteError when the outcome cannot be known. */
export async function conditional(client: CassandraClient, query: string, params: unknown[]): Promise<ConditionalResult> {
  try {
    const result = await client.execute(query, params);
    return { applied: result.wasApplied(), current: result.first() ?? undefined };
  } catch (error) {
    if (isAmbiguous(error)) throw new AmbiguousWriteError(`outcome of a conditional write is unknown: ${(error as Error).message}`);
    throw error;
  }
}

/** A read that sees every committed (and completes every in-flight) lightweight transaction. */
export async function serialRead(client: CassandraClient, query: string, params: unknown[]): Promise<Row | undefined> {
  const result = await client.execute(query, params, { consistency: types.consistencies.localSerial });
  return result.first() ?? undefined;
}

export const consistencies = types.consistencies;

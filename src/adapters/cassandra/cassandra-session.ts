import cassandra from "cassandra-driver";
import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { accountNameKey } from "../../domain/accounts/account-listing.js";
import { DependencyUnavailableError, type DependencyProbe } from "../../ports/dependency.js";

const { Client, types, errors, policies } = cassandra;
export type Row = cassandra.types.Row;
type Params = cassandra.ArrayOrObject | undefined;

const READ = /^\s*SELECT\s/i;

/** Errors that mean Cassandra cannot answer now (down, stalled, overloaded), as opposed to a bad query. */
function isUnreachable(error: unknown): boolean {
  if (error instanceof errors.NoHostAvailableError || error instanceof errors.OperationTimedOutError) return true;
  if (error instanceof errors.BusyConnectionError) return true;
  if (error instanceof errors.ResponseError) {
    const codes = types.responseErrorCodes;
    return [codes.unavailableException, codes.overloaded, codes.isBootstrapping, codes.readTimeout, codes.writeTimeout, codes.readFailure, codes.writeFailure]
      .includes(error.code);
  }
  // A connection closed under a request (the server went away mid-query): the driver's plain DriverError, whose
  // subclasses name everything else (bad arguments, authentication, unsupported, internal).
  return error instanceof errors.DriverError && Object.getPrototypeOf(error) === errors.DriverError.prototype;
}

/**
 * The driver's client as the adapters see it: the same `execute`, except that
 * "cannot reach Cassandra" leaves as DependencyUnavailableError (503 with
 * Retry-After at the edges), never as a crash.
 */
export class CassandraClient {
  /** `serial`: the consistency of the reads that must see every lightweight transaction (CASSANDRA_SERIAL_CONSISTENCY). */
  constructor(readonly driver: InstanceType<typeof Client>, readonly serial: number = types.consistencies.localSerial) {}

  async execute(query: string, params?: Params, options?: cassandra.QueryOptions): Promise<cassandra.types.ResultSet> {
    try {
      // A read may run twice: sent to a second node when the first is slow (speculative execution) or retried on the
      // next after a timeout. A write never is: a second run of a condition or an append is not the same statement.
      const read = READ.test(query);
      return await this.driver.execute(query, params, read ? { ...options, isIdempotent: true } : options);
    } catch (error) {
      if (isUnreachable(error)) throw new DependencyUnavailableError("cassandra", `Cassandra is unreachable: ${(error as Error).message}`, { cause: error });
      throw error;
    }
  }

  /** An unlogged batch of plain writes (idempotent inserts), with the same outage mapping as execute. */
  async batch(queries: { query: string; params: Params }[]): Promise<void> {
    if (queries.length === 0) return;
    try {
      await this.driver.batch(queries, { prepare: true, logged: false });
    } catch (error) {
      if (isUnreachable(error)) throw new DependencyUnavailableError("cassandra", `Cassandra is unreachable: ${(error as Error).message}`, { cause: error });
      throw error;
    }
  }

  /** A logged batch of plain writes: all of them or none, whatever partitions they touch (a change and its audit rows). */
  async loggedBatch(queries: { query: string; params: Params }[]): Promise<void> {
    if (queries.length === 0) return;
    try {
      await this.driver.batch(queries, { prepare: true, logged: true });
    } catch (error) {
      if (isUnreachable(error)) throw new DependencyUnavailableError("cassandra", `Cassandra is unreachable: ${(error as Error).message}`, { cause: error });
      throw error;
    }
  }

  /** A batch of writes to one partition that carries conditions (a lightweight transaction), with the same outage mapping as execute. */
  async executeBatch(queries: { query: string; params: Params }[]): Promise<cassandra.types.ResultSet> {
    try {
      return await this.driver.batch(queries, { prepare: true });
    } catch (error) {
      if (isUnreachable(error)) throw new DependencyUnavailableError("cassandra", `Cassandra is unreachable: ${(error as Error).message}`, { cause: error });
      throw error;
    }
  }

  /** Connects (the driver otherwise does at the first statement), with the same outage mapping as execute. */
  async connect(): Promise<void> {
    try {
      await this.driver.connect();
    } catch (error) {
      if (isUnreachable(error)) throw new DependencyUnavailableError("cassandra", `Cassandra is unreachable: ${(error as Error).message}`, { cause: error });
      throw error;
    }
  }

  shutdown(): Promise<void> {
    return this.driver.shutdown();
  }
}

/** Readiness: asks the local node for its version, with a short bound. */
export function cassandraProbe(client: CassandraClient): DependencyProbe {
  return {
    name: "cassandra",
    async check() {
      await client.execute("SELECT release_version FROM system.local", [], { readTimeout: 2000, consistency: types.consistencies.one, prepare: false });
    },
  };
}

/** The consistency levels of ordinary statements: a quorum or stronger, so that a read overlaps every acknowledged write. */
export const CONSISTENCIES = ["LOCAL_QUORUM", "QUORUM", "ALL"] as const;
export type Consistency = (typeof CONSISTENCIES)[number];
/** The levels of lightweight transactions (Paxos) and of the reads that must see them. */
export const SERIAL_CONSISTENCIES = ["LOCAL_SERIAL", "SERIAL"] as const;
export type SerialConsistency = (typeof SERIAL_CONSISTENCIES)[number];
export const REPLICATION_STRATEGIES = ["NetworkTopologyStrategy", "SimpleStrategy"] as const;

/** The keyspace's replication when the service creates it: NetworkTopologyStrategy puts `factor` copies in the local data center. */
export interface KeyspaceReplication {
  readonly strategy: (typeof REPLICATION_STRATEGIES)[number];
  readonly factor: number;
}

/**
 * Where Cassandra is, how the keyspace is made and the levels every statement asks for. The runtime passes config's
 * CassandraConfig (CASSANDRA_*), which has this shape; declared here so that the adapter does not import config.
 */
export interface CassandraSettings {
  readonly contactPoints: readonly string[];
  readonly keyspace: string;
  readonly localDataCenter: string;
  readonly replication: KeyspaceReplication;
  /** Every statement's level, LOCAL_QUORUM when left out. */
  readonly consistency?: Consistency;
  /** Paxos's level and the serial reads', LOCAL_SERIAL when left out. */
  readonly serialConsistency?: SerialConsistency;
  /** How long a read waits for its first node before it is sent to another as well (500 ms when left out). */
  readonly speculativeReadDelayMs?: number;
}

/** A CQL string literal. */
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** The statement that creates the keyspace (when it does not exist) with the settings' replication. */
export function keyspaceStatement(settings: Pick<CassandraSettings, "keyspace" | "localDataCenter" | "replication">): string {
  const { strategy, factor } = settings.replication;
  if (!Number.isInteger(factor) || factor < 1) throw new Error(`invalid replication factor ${factor}`);
  const map = strategy === "SimpleStrategy"
    ? `{'class': 'SimpleStrategy', 'replication_factor': ${factor}}`
    : `{'class': 'NetworkTopologyStrategy', ${literal(settings.localDataCenter)}: ${factor}}`;
  return `CREATE KEYSPACE IF NOT EXISTS ${settings.keyspace} WITH replication = ${map}`;
}

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), "migrations");

/**
 * Statements run at the settings' consistency (LOCAL_QUORUM) and Paxos at their serial one (LOCAL_SERIAL);
 * money-deciding reads ask for the serial level themselves. Varints and bigints map to BigInt.
 */
export function clientOptions(config: CassandraSettings, keyspace?: string): cassandra.ClientOptions {
  return {
    contactPoints: [...config.contactPoints],
    localDataCenter: config.localDataCenter,
    keyspace,
    encoding: { useBigIntAsVarint: true, useBigIntAsLong: true },
    queryOptions: {
      prepare: true,
      consistency: levelOf(config.consistency ?? "LOCAL_QUORUM"),
      serialConsistency: levelOf(config.serialConsistency ?? "LOCAL_SERIAL"),
    },
    // Above the server's cas_contention_timeout + write_request_timeout, so the
    // client never gives up on a write the server may still commit.
    // A paused or cut-off node answers nothing: after a few timeouts in a row its connection is closed and the node
    // is left out until it answers a new connection, instead of after the driver's default of 64.
    socketOptions: { readTimeout: 15_000, connectTimeout: 5_000, defunctReadTimeoutThreshold: DEFUNCT_AFTER_TIMEOUTS },
    policies: {
      // After an outage, reconnect every second (the default backs off towards
      // minutes, which kept processes failing long after Cassandra was back).
      reconnection: new policies.reconnection.ConstantReconnectionPolicy(1000),
      // A read not answered within the delay is sent to one more replica as well, and the first answer wins: a
      // stalled coordinator costs a read this delay, not the read timeout. Only reads (see execute) take part.
      speculativeExecution: new policies.speculativeExecution.ConstantSpeculativeExecutionPolicy(
        config.speculativeReadDelayMs ?? DEFAULT_SPECULATIVE_READ_DELAY_MS, 1),
    },
    pooling: { heartBeatInterval: 5_000 }, // finds a silently dead idle connection within seconds
  };
}

/** Timeouts in a row on one connection before it is closed as dead. */
const DEFUNCT_AFTER_TIMEOUTS = 3;
/** CASSANDRA_SPECULATIVE_READ_DELAY's default, for callers that leave it out. */
export const DEFAULT_SPECULATIVE_READ_DELAY_MS = 500;

/** The driver's number of a consistency level. */
function levelOf(name: Consistency | SerialConsistency): number {
  const key = name.toLowerCase().replace(/_(\w)/g, (_, letter: string) => letter.toUpperCase()) as keyof typeof types.consistencies;
  return types.consistencies[key];
}

/** Creates the keyspace, applies pending migrations in order, and returns a client bound to the keyspace. */
export async function openSession(config: CassandraSettings, agreement: SchemaAgreement = {}): Promise<CassandraClient> {
  if (!/^[a-z][a-z0-9_]{0,47}$/.test(config.keyspace)) throw new Error(`invalid keyspace name "${config.keyspace}"`);
  const bootstrap = new CassandraClient(new Client(clientOptions(config)));
  try {
    // A restart (the usual start) finds the keyspace and changes no schema: nothing to pin or wait for.
    await bootstrap.connect();
    if (!bootstrap.driver.metadata.keyspaces[config.keyspace]) await new SchemaChanges(bootstrap, agreement).run(keyspaceStatement(config));
  } finally {
    await bootstrap.shutdown();
  }
  const client = new CassandraClient(new Client(clientOptions(config, config.keyspace)), levelOf(config.serialConsistency ?? "LOCAL_SERIAL"));
  try {
    await migrate(client, agreement);
  } catch (error) {
    await client.shutdown();
    throw error;
  }
  return client;
}

/** How long a schema change waits for every node to agree on the schema before start-up gives up and tries again. */
export const SCHEMA_AGREEMENT_TIMEOUT_MS = 120_000;

/**
 * Whether every node has the coordinator's schema: its own schema version and its peers' (as gossip told it) are one.
 * The driver's own check after a schema change asks the same two tables but gives up after 10 s; a node that is down
 * counts with the version it had, so a change made while one is down waits for it (and start-up tries again).
 */
export async function nodesAgree(client: CassandraClient, coordinator: cassandra.Host): Promise<boolean> {
  const options = { prepare: false, host: coordinator, consistency: types.consistencies.one };
  const local = await client.execute("SELECT schema_version FROM system.local", [], options);
  const peers = await client.execute("SELECT schema_version FROM system.peers", [], options);
  const versions = new Set([...local.rows, ...peers.rows].map((row) => row.schema_version?.toString()).filter(Boolean));
  return versions.size === 1;
}

/** How migrations learn that the nodes agree on the schema, and how long they wait for it (tests shorten both). */
export interface SchemaAgreement {
  /** Whether the nodes agree now, as `coordinator` sees them; by default `nodesAgree`. */
  readonly check?: (client: CassandraClient, coordinator: cassandra.Host) => Promise<boolean>;
  /** The bound on each wait, SCHEMA_AGREEMENT_TIMEOUT_MS when left out. */
  readonly timeoutMs?: number;
  readonly pollMs?: number;
}

/**
 * The nodes still disagree on the schema after a migration's statement (or before the first one): start-up stops
 * here, readiness stays 503, and it tries again. Going on would send the next statement, or a query, to a node that
 * has not heard of a table yet: on a loaded ring that once split a table's definition between nodes (finding 2, docs/chaos.md).
 */
export class SchemaDisagreementError extends DependencyUnavailableError {
  constructor(message: string) {
    super("cassandra", message);
    this.name = "SchemaDisagreementError";
  }
}

/**
 * Schema statements through one coordinator, each followed by a bounded wait for schema agreement. The coordinator
 * is the lowest address among the nodes up, so processes that start together (each running the same idempotent
 * statements) send them to the same node, which applies them one at a time: no two nodes create the same table at once.
 */
export class SchemaChanges {
  private coordinator: cassandra.Host | undefined;

  constructor(private readonly client: CassandraClient, private readonly agreement: SchemaAgreement = {}) {}

  /** The node every statement goes through (chosen once, at the first statement). */
  async host(): Promise<cassandra.Host> {
    if (this.coordinator) return this.coordinator;
    await this.client.connect();
    const up = this.client.driver.hosts.values().filter((h) => h.isUp()).sort((a, b) => a.address.localeCompare(b.address));
    if (!up[0]) throw new DependencyUnavailableError("cassandra", "Cassandra is unreachable: no node is up to change the schema through");
    this.coordinator = up[0];
    return up[0];
  }

  /**
   * Runs one statement on the coordinator (never retried on another node), then waits until the nodes agree. An
   * `ALTER TABLE t ADD c …` whose column exists is skipped: it has no IF NOT EXISTS before Cassandra 4.1, and a
   * process that died after it but before its version was recorded runs its migration again.
   */
  async run(statement: string): Promise<void> {
    const host = await this.host();
    const added = /^ALTER\s+TABLE\s+(\w+)\s+ADD\s+(\w+)\s/i.exec(statement);
    if (added) {
      const column = await this.client.execute(
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ? AND column_name = ?",
        [this.client.driver.keyspace, added[1]!.toLowerCase(), added[2]!.toLowerCase()], { prepare: false, host, consistency: types.consistencies.one },
      );
      if (column.rows.length > 0) return;
    }
    await this.client.execute(statement, [], { prepare: false, host });
    await this.settled(`after "${statement.replace(/\s+/g, " ").slice(0, 80)}"`);
  }

  /** Waits, within the bound, until the nodes agree on the schema; SchemaDisagreementError when they never do. */
  async settled(when: string): Promise<void> {
    const { check = nodesAgree, timeoutMs = SCHEMA_AGREEMENT_TIMEOUT_MS, pollMs = 500 } = this.agreement;
    const host = await this.host();
    const deadline = Date.now() + timeoutMs;
    while (!(await check(this.client, host))) {
      if (Date.now() >= deadline) {
        throw new SchemaDisagreementError(`Cassandra's nodes do not agree on the schema ${timeoutMs} ms ${when}: migrations stop here and start again`);
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }
}

/** api_keys_by_account (version 8) gets every key written before it existed. */
export async function copyKeysByAccount(client: CassandraClient): Promise<void> {
  let pageState: string | undefined;
  do {
    const page = await client.execute("SELECT secret_hash, key_id, account_id FROM api_keys_by_hash", [], { fetchSize: 500, ...(pageState ? { pageState } : {}) });
    for (const row of page.rows) {
      await client.execute("INSERT INTO api_keys_by_account (account_id, key_id, secret_hash) VALUES (?, ?, ?)", [row.account_id, row.key_id, row.secret_hash]);
    }
    pageState = page.pageState ?? undefined;
  } while (pageState);
}

/** Copies every account of account_ledger into both buckets of accounts_listed once (migration 0015), page by page. */
async function copyAccountsListed(client: CassandraClient): Promise<void> {
  const insert = "INSERT INTO accounts_listed (bucket, sort_key, account_id) VALUES (?, ?, ?)";
  let pageState: string | undefined;
  do {
    const page = await client.execute("SELECT account_id, hold_id, name FROM account_ledger", [], { fetchSize: 500, ...(pageState ? { pageState } : {}) });
    for (const row of page.rows) {
      if (row.hold_id !== "") continue;
      await client.execute(insert, ["name", accountNameKey((row.name as string | null) ?? ""), row.account_id]);
      await client.execute(insert, ["id", row.account_id, row.account_id]);
    }
    pageState = page.pageState ?? undefined;
  } while (pageState);
}

/**
 * Data a migration's new table needs from the old ones, copied once right
 * after its CQL (and before the version is recorded, so a process that dies
 * midway copies again). Idempotent: plain INSERTs of the same rows.
 */
const AFTER_MIGRATION: Record<number, (client: CassandraClient) => Promise<void>> = {
  8: copyKeysByAccount,
  15: copyAccountsListed,
};

/** The statements of a migration file, in order (comment lines dropped, split at semicolons). */
export function migrationStatements(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => !line.trim().startsWith("--"))
    .join("\n")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The migration files (NNNN_name.cql) in order, with their version. */
export async function migrationFiles(): Promise<{ version: number; file: string; statements: string[] }[]> {
  const files = (await readdir(MIGRATIONS)).filter((f) => /^\d{4}_.+\.cql$/.test(f)).sort();
  return Promise.all(files.map(async (file) => ({
    version: Number(file.slice(0, 4)), file, statements: migrationStatements(await readFile(join(MIGRATIONS, file), "utf8")),
  })));
}

/** How long the migration lock outlives its holder's last sign of life (a process that dies holding it). */
const LOCK_TTL_SECONDS = Math.ceil(SCHEMA_AGREEMENT_TIMEOUT_MS / 1000) + 60;

/**
 * One migrating process at a time: a row taken with a lightweight transaction, with a TTL so that a holder that dies
 * lets go, renewed after every statement. Without it two processes starting together on a fresh keyspace both send
 * `ALTER TABLE … ADD`, and the second fails (the column exists).
 */
class MigrationLock {
  readonly owner = randomUUID();

  constructor(private readonly client: CassandraClient) {}

  /** Takes the lock, waiting (bounded) while another process holds it. */
  async take(timeoutMs: number, pollMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const taken = await conditional(this.client,
        `INSERT INTO schema_migration_lock (name, owner) VALUES ('migrations', ?) IF NOT EXISTS USING TTL ${LOCK_TTL_SECONDS}`, [this.owner]);
      if (taken.applied) return;
      if (Date.now() >= deadline) {
        throw new DependencyUnavailableError("cassandra", `another process (${String(taken.current?.owner)}) has been migrating the schema for ${timeoutMs} ms: start-up tries again`);
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** Renews the lock; a holder whose lock lapsed (and was taken) stops. */
  async renew(): Promise<void> {
    const renewed = await conditional(this.client,
      `UPDATE schema_migration_lock USING TTL ${LOCK_TTL_SECONDS} SET owner = ? WHERE name = 'migrations' IF owner = ?`, [this.owner, this.owner]);
    if (!renewed.applied) throw new DependencyUnavailableError("cassandra", "the migration lock lapsed and another process took it: start-up tries again");
  }

  async release(): Promise<void> {
    await conditional(this.client, "DELETE FROM schema_migration_lock WHERE name = 'migrations' IF owner = ?", [this.owner]);
  }
}

/**
 * Versioned CQL files, each applied once, by one process at a time (MigrationLock; the others wait, then find them
 * applied). Every statement is idempotent (IF NOT EXISTS, an added column skipped when it exists) and the version is
 * recorded after its statements and data copies, so a process that dies midway runs the rest again. Schema statements
 * go through one coordinator and wait for agreement after each.
 */
export async function migrate(client: CassandraClient, agreement: SchemaAgreement = {}): Promise<void> {
  const schema = new SchemaChanges(client, agreement);
  await client.connect();
  const keyspace = client.driver.keyspace;
  for (const [table, columns] of [["schema_migrations", "version int PRIMARY KEY, name text, applied_at timestamp"], ["schema_migration_lock", "name text PRIMARY KEY, owner text"]]) {
    if (!(await client.driver.metadata.getTable(keyspace, table!))) await schema.run(`CREATE TABLE IF NOT EXISTS ${table} (${columns})`);
  }
  const pending = async () => {
    const applied = new Set((await client.execute("SELECT version FROM schema_migrations")).rows.map((r) => r.version as number));
    return (await migrationFiles()).filter((m) => !applied.has(m.version));
  };
  if ((await pending()).length === 0) return;
  const lock = new MigrationLock(client);
  await lock.take(agreement.timeoutMs ?? SCHEMA_AGREEMENT_TIMEOUT_MS, agreement.pollMs ?? 500);
  try {
    // Not one statement before the nodes agree: the coordinator must not be a node behind on the schema.
    await schema.settled("before the first pending migration");
    for (const { version, file, statements } of await pending()) {
      for (const statement of statements) {
        await schema.run(statement);
        await lock.renew();
      }
      await AFTER_MIGRATION[version]?.(client);
      await client.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?) IF NOT EXISTS", [
        version, file, new Date(),
      ]);
    }
  } finally {
    await lock.release().catch(() => {});
  }
}

/**
 * A conditional write whose outcome is unknown: resolve by reading, never by
 * applying again. Left unresolved (the read failed too), it is an outage.
 */
export class AmbiguousWriteError extends DependencyUnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("cassandra", message, options);
  }
}

export function isAmbiguous(error: unknown): boolean {
  const cause = error instanceof DependencyUnavailableError ? error.cause : error;
  return (
    (cause instanceof errors.ResponseError && cause.code === types.responseErrorCodes.writeTimeout) ||
    cause instanceof errors.OperationTimedOutError ||
    cause instanceof errors.NoHostAvailableError
  );
}

export interface ConditionalResult {
  readonly applied: boolean;
  /** On failure, the current values of the condition's columns (or the whole row for IF NOT EXISTS). */
  readonly current?: Row;
  /** On failure, the same for each row a batch's conditions name that exists. */
  readonly rows?: readonly Row[];
}

/** Runs a lightweight transaction; throws AmbiguousWriteError when the outcome cannot be known. */
export async function conditional(client: CassandraClient, query: string, params: unknown[], options?: cassandra.QueryOptions): Promise<ConditionalResult> {
  try {
    const result = await client.execute(query, params, options);
    return { applied: result.wasApplied(), current: result.first() ?? undefined };
  } catch (error) {
    if (isAmbiguous(error)) throw new AmbiguousWriteError(`outcome of a conditional write is unknown: ${(error as Error).message}`, { cause: error });
    throw error;
  }
}

/**
 * Several writes to one partition as one lightweight transaction: the batch's
 * conditions decide for all of them. Throws AmbiguousWriteError when the
 * outcome cannot be known.
 */
export async function conditionalBatch(client: CassandraClient, queries: { query: string; params: unknown[] }[]): Promise<ConditionalResult> {
  try {
    const result = await client.executeBatch(queries as { query: string; params: Params }[]);
    return { applied: result.wasApplied(), current: result.first() ?? undefined, rows: result.rows ?? [] };
  } catch (error) {
    if (isAmbiguous(error)) throw new AmbiguousWriteError(`outcome of a conditional write is unknown: ${(error as Error).message}`, { cause: error });
    throw error;
  }
}

/** A read that sees every committed (and completes every in-flight) lightweight transaction. */
export async function serialRead(client: CassandraClient, query: string, params: unknown[]): Promise<Row | undefined> {
  const result = await client.execute(query, params, { consistency: client.serial });
  return result.first() ?? undefined;
}

export const consistencies = types.consistencies;

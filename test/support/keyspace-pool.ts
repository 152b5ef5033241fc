import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cassandra from "cassandra-driver";
import { repoPath } from "./repo.js";

/**
 * Migrated keyspaces that test services on the real backend take and give back, instead of creating one and
 * dropping it per service. Measured on this 2-core host: creating and migrating a keyspace took 2.2–4.7 s and
 * dropping it 1.3–3.0 s, with about 8.4 CPU-seconds of Cassandra's for the pair (schema changes are costly in
 * Cassandra 5), some 45 times per real half; truncating its 22 tables took 54–190 ms and 0.1–0.4 CPU-seconds.
 *
 * A keyspace given back is emptied first (every table but schema_migrations truncated), so the next service finds it
 * as a fresh one would be, with every migration applied. The pool is a directory of files on this machine, one per
 * free keyspace; taking one is deleting its file, which exactly one process can do. It is named by a hash of the
 * migration files and the Cassandra address: a migration added or changed starts a new pool of fresh keyspaces. A
 * keyspace in the pool that Cassandra no longer has (its data directory wiped) is created again by the service's own
 * start-up (CREATE KEYSPACE IF NOT EXISTS, then its migrations). The pool grows to the number of services that ran at
 * once, and its keyspaces stay in Cassandra after the run, ready for the next one.
 */
const directories = new Map<string, string>();

function poolDirectory(contactPoints: string): string {
  const known = directories.get(contactPoints);
  if (known) return known;
  const migrations = repoPath("src", "adapters", "cassandra", "migrations");
  const hash = createHash("sha256").update(contactPoints);
  for (const name of readdirSync(migrations).sort()) hash.update(name).update(readFileSync(join(migrations, name)));
  const dir = join(tmpdir(), `gen-test-keyspaces-${hash.digest("hex").slice(0, 12)}`);
  mkdirSync(dir, { recursive: true });
  directories.set(contactPoints, dir);
  return dir;
}

/** A free keyspace of the pool, taken; or undefined when every one is in use (the caller makes a new one). */
export function takePooledKeyspace(contactPoints: string): string | undefined {
  const dir = poolDirectory(contactPoints);
  for (const name of readdirSync(dir)) {
    try {
      unlinkSync(join(dir, name));
      return name;
    } catch {
      // Another process took it first.
    }
  }
  return undefined;
}

/** Empties the keyspace (all its tables but schema_migrations) and gives it back to the pool. */
export async function givePooledKeyspaceBack(contactPoints: string, keyspace: string): Promise<void> {
  const client = new cassandra.Client({
    contactPoints: contactPoints.split(","), localDataCenter: "datacenter1", socketOptions: { readTimeout: 60_000 },
  });
  try {
    const tables = (await client.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", [keyspace])).rows
      .map((row) => row.table_name as string)
      .filter((table) => table !== "schema_migrations");
    await Promise.all(tables.map((table) => client.execute(`TRUNCATE ${keyspace}.${table}`)));
  } finally {
    await client.shutdown();
  }
  writeFileSync(join(poolDirectory(contactPoints), keyspace), "");
}

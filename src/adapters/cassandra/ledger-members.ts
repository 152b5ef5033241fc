import { createHash } from "node:crypto";
import type { CassandraClient } from "./cassandra-session.js";

/** A process that commits ledger rounds for the accounts it owns, and where its peers reach it. */
export interface Member {
  readonly id: string;
  /** Its peer endpoint, http://host:port. */
  readonly address: string;
}

/** How often a member renews its row, and how long the row outlives a member that stopped renewing it. */
const HEARTBEAT_MS = 2_000;
const TTL_SECONDS = 6;

/**
 * The live members of a cluster's ledger, registered in Cassandra
 * (ledger_members, rows with a TTL renewed by a heartbeat), and each
 * account's owner among them by rendezvous hashing: the member whose hash
 * with the account id is highest. A member that joins or leaves moves only
 * the accounts it wins or held. Ownership only routes operations: every round
 * is still checked by its version, so two members that both believe they own
 * an account (a change not yet seen by both) are slower for a moment, never wrong.
 */
export class LedgerMembers {
  private members: readonly Member[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: CassandraClient,
    private readonly cluster: string,
    /** This process, when it serves peers; undefined: it only forwards. */
    readonly self: Member | undefined,
  ) {}

  /** Registers this process (if it serves peers), reads the members, and keeps doing both. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat().catch(() => undefined), HEARTBEAT_MS);
    this.timer.unref();
  }

  /** Stops the heartbeat and removes this process's row, so its accounts move at once. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    if (this.self) await this.client.execute("DELETE FROM ledger_members WHERE cluster = ? AND member_id = ?", [this.cluster, this.self.id]);
  }

  /** The members as last read. */
  get known(): readonly Member[] {
    return this.members;
  }

  /** Renews this process's row and reads the members now (the heartbeat does it every HEARTBEAT_MS). */
  async refresh(): Promise<void> {
    await this.beat();
  }

  private async beat(): Promise<void> {
    if (this.self) {
      await this.client.execute(`INSERT INTO ledger_members (cluster, member_id, address) VALUES (?, ?, ?) USING TTL ${TTL_SECONDS}`, [
        this.cluster, this.self.id, this.self.address,
      ]);
    }
    const rows = (await this.client.execute("SELECT member_id, address FROM ledger_members WHERE cluster = ?", [this.cluster])).rows;
    this.members = rows.map((row) => ({ id: row.member_id as string, address: row.address as string }));
  }

  /** The account's owner, or undefined when no member is known. */
  owner(accountId: string): Member | undefined {
    let best: Member | undefined;
    let bestScore = "";
    for (const member of this.members) {
      const score = createHash("sha1").update(member.id).update("\0").update(accountId).digest("hex");
      if (score > bestScore) {
        best = member;
        bestScore = score;
      }
    }
    return best;
  }
}

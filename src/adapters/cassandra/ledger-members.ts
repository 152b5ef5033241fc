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
  private stopped = false;
  /** The heartbeat under way: one at a time, so an older read never overwrites a newer one and stop() can wait for it. */
  private beating: Promise<void> = Promise.resolve();

  constructor(
    private readonly client: CassandraClient,
    private readonly cluster: string,
    /** This process, when it serves peers; undefined: it only forwards. */
    readonly self: Member | undefined,
  ) {}

  /** Registers this process (if it serves peers), reads the members, and keeps doing both every HEARTBEAT_MS. */
  async start(): Promise<void> {
    await this.refresh();
    const next = () => {
      this.timer = setTimeout(() => {
        void this.refresh().catch(() => undefined).then(() => {
          if (!this.stopped) next();
        });
      }, HEARTBEAT_MS);
      this.timer.unref();
    };
    next();
  }

  /**
   * Stops the heartbeat and removes this process's row: the others route its
   * accounts elsewhere from their next heartbeat on (within HEARTBEAT_MS).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.beating.catch(() => undefined);
    if (this.self) await this.client.execute("DELETE FROM ledger_members WHERE cluster = ? AND member_id = ?", [this.cluster, this.self.id]);
  }

  /** The members as last read. */
  get known(): readonly Member[] {
    return this.members;
  }

  /** Renews this process's row and reads the members now (the heartbeat does it every HEARTBEAT_MS). */
  refresh(): Promise<void> {
    this.beating = this.beating.catch(() => undefined).then(() => this.beat());
    return this.beating;
  }

  private async beat(): Promise<void> {
    if (this.self && !this.stopped) {
      await this.client.execute(`INSERT INTO ledger_members (cluster, member_id, address) VALUES (?, ?, ?) USING TTL ${TTL_SECONDS}`, [
        this.cluster, this.self.id, this.self.address,
      ]).catch(() => undefined); // the members are still read: a stale list would route to the dead
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

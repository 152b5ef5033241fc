import type { Money } from "../../../domain/money.js";
import type { ReleaseReason } from "../../../domain/ledger/release-reasons.js";
import { NO_SPENDING } from "../../../domain/accounts/key-limits.js";
import type {
  AccountChange, AccountDetails, AccountListPage, AccountListQuery, AdjustOutcome, BalanceSnapshot, Credited, KeyAccount, Ledger, LedgerEntryPage, LedgerEntryQuery, ReserveOptions, ReserveOutcome, SettledTokens, Settlement, Shortfall,
} from "../../../ports/ledger.js";
import { conditional, type CassandraClient } from "../cassandra-session.js";
import type { AuditRecord } from "../../../ports/audit-log.js";
import { AuditOutbox, encodeRecord } from "../audit-outbox.js";
import { noTelemetry, type Telemetry } from "../../../ports/telemetry.js";
import { accountDetails, listAccount, listAccounts, relistAccount } from "./account-directory.js";
import { keyHolds, MONEY, spendingOf, type Journal, type JournalEntry, type Outcome } from "./account-state.js";

/** The balance an entry records after its movement. */
const figuresOf = (entry: JournalEntry): BalanceSnapshot => ({ balance: BigInt(entry.balanceAfter), reserved: BigInt(entry.reservedAfter) });
import { GroupCommitQueue } from "./group-commit.js";
import type { BalanceAlert, BalanceAlertOutbox } from "../../../ports/balance-alerts.js";
import { BalanceAlertIndex } from "./balance-alerts.js";
import { LedgerRounds } from "./ledger-rounds.js";
import { LedgerRows } from "./ledger-rows.js";
import { ledgerEntryOf, LedgerStatement } from "./ledger-statement.js";
import { MAX_WRITTEN_HOLDS } from "./written-rows.js";

/**
 * The ledger on Cassandra. An account is one partition of account_ledger: its
 * money in one row (hold_id '', the money row), changed only by
 * `UPDATE ... IF version = ?`, and one row per open hold, added and removed in
 * the same conditional batch (ledger-rows.ts).
 * Within a process, operations on one account queue and are group-committed
 * (group-commit.ts): one Paxos round applies a whole batch, so a hot account
 * is limited by round trips, not by contention. Each round (ledger-rounds.ts)
 * judges its batch by the ledger's rules (ledger-rules.ts); a write of
 * unknown outcome is settled by reading, never by writing again blindly.
 * Each round's entries (its journal, each entry with the id of the operation
 * that made it) are written in the money row and copied, one row per round,
 * into ledger_rounds before the next round replaces them (ledger-statement.ts).
 * The open-hold counts and per-key held sums are tallies in the money row,
 * kept by the rounds that add and remove holds, so a reservation's limits are
 * checked in the same round as its funds, however deep the backlog; a
 * settlement charges at most hold + available and records the rest in
 * `shortfalls` by the same write. That map is also what a repeated settle
 * answers from (see LedgerRounds.answer).
 */
export class CassandraLedger implements Ledger, BalanceAlertOutbox {
  private readonly rows: LedgerRows;
  private readonly statement: LedgerStatement;
  private readonly queue: GroupCommitQueue;
  private readonly outbox: AuditOutbox;
  private readonly alerts: BalanceAlertIndex;

  constructor(
    private readonly client: CassandraClient,
    private readonly now: () => number = Date.now,
    /** Compare-and-set conflicts and writes of unknown outcome resolved. */
    telemetry: Telemetry = noTelemetry,
    /** Holds the kept rows may know in all (MAX_WRITTEN_HOLDS). */
    maxWrittenHolds = MAX_WRITTEN_HOLDS,
  ) {
    this.rows = new LedgerRows(client, now);
    this.outbox = new AuditOutbox(client, now);
    this.statement = new LedgerStatement(client, this.rows);
    this.alerts = new BalanceAlertIndex(client, now);
    this.queue = new GroupCommitQueue(new LedgerRounds(client, this.rows, this.statement, now, telemetry, maxWrittenHolds, this.alerts), telemetry);
  }

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    // An account of the table before version 10 is moved here by its first operation: its id is taken.
    if ((await this.client.execute("SELECT account_id FROM accounts WHERE account_id = ?", [accountId])).rowLength > 0) {
      throw new Error(`account ${accountId} exists`);
    }
    const at = this.now();
    const entries: JournalEntry[] = initialBalance > 0n
      ? [{ seq: "0", type: "credit", amount: initialBalance.toString(), balanceAfter: initialBalance.toString(), reservedChange: "0", reservedAfter: "0", at }]
      : [];
    const journal: Journal = { version: "0", entries };
    // Listed first: a listing skips an index row whose account is missing, and never misses an account.
    await listAccount(this.client, accountId, name);
    const result = await conditional(
      this.client,
      "INSERT INTO account_ledger (account_id, hold_id, name, created_at, balance, reserved, version, journal, open_holds) VALUES (?, ?, ?, ?, ?, 0, 0, ?, 0) IF NOT EXISTS",
      [accountId, MONEY, name, new Date(at), initialBalance, JSON.stringify(journal)],
    );
    if (!result.applied) throw new Error(`account ${accountId} exists`);
    this.statement.copyInBackground(accountId, journal);
  }

  /**
   * An audited credit: its event rides in the credit's journal entry and is copied out after (AuditOutbox). Answers
   * the balance its entry records. A named one (`operationId`, decision 0039) that made an entry before answers
   * that entry's figures, and its event is dropped (nothing applied).
   */
  async credit(accountId: string, amount: Money, audit?: AuditRecord, operationId?: string): Promise<Credited | undefined> {
    const answered: { outcome?: Outcome } = {};
    await this.outbox.conditional(audit, { ledger: accountId }, async () => {
      const outcome = await this.queue.enqueue(accountId, {
        kind: "credit", amount, ...(audit ? { audit: encodeRecord(audit) } : {}), ...(operationId !== undefined && { once: operationId }),
      });
      answered.outcome = outcome;
      return typeof outcome === "object" && "credited" in outcome;
    });
    const outcome = answered.outcome;
    if (typeof outcome === "object" && "credited" in outcome) return figuresOf(outcome.credited);
    if (typeof outcome === "object" && "madeBefore" in outcome) return { ...figuresOf(outcome.madeBefore), repeated: true };
    return outcome === "unknown_account" ? undefined : this.balance(accountId);
  }

  async adjust(accountId: string, amount: Money, reason: string, audit?: AuditRecord, operationId?: string): Promise<AdjustOutcome> {
    const answered: { outcome?: Outcome } = {};
    await this.outbox.conditional(audit, { ledger: accountId }, async () => {
      const outcome = await this.queue.enqueue(accountId, {
        kind: "adjust", amount, reason, ...(audit ? { audit: encodeRecord(audit) } : {}), ...(operationId !== undefined && { once: operationId }),
      });
      answered.outcome = outcome;
      return typeof outcome === "object" && "adjusted" in outcome;
    });
    const outcome = answered.outcome;
    if (typeof outcome === "object" && "madeBefore" in outcome) {
      const entry = ledgerEntryOf(outcome.madeBefore);
      return { snapshot: figuresOf(outcome.madeBefore), entry, repeated: true };
    }
    if (typeof outcome !== "object" || !("adjusted" in outcome)) return outcome === "unknown_account" ? "unknown_account" : "insufficient_funds";
    const entry = ledgerEntryOf(outcome.adjusted);
    return { snapshot: { balance: entry.balanceAfter, reserved: entry.reservedAfter }, entry };
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const row = await this.rows.moneyRow(accountId, "balance, reserved");
    return row ? { balance: row.balance as bigint, reserved: row.reserved as bigint } : undefined;
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return (await this.queue.enqueue(accountId, { kind: "reserve", reservationId, amount, options })) as ReserveOutcome;
  }

  async settle(accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined> {
    const outcome = await this.queue.enqueue(accountId, { kind: "settle", reservationId, amount, tokens });
    return typeof outcome === "object" && "charged" in outcome ? outcome : undefined;
  }

  async release(accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void> {
    await this.queue.enqueue(accountId, { kind: "release", reservationId, ...(reason !== undefined && { reason }) });
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    const row = await this.rows.moneyRow(accountId, "shortfalls");
    const recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
    return Object.entries(recorded).map(([reservationId, amount]) => ({ reservationId, amount }));
  }

  async listAccounts(query: AccountListQuery): Promise<AccountListPage> {
    return listAccounts(this.client, query);
  }

  async account(accountId: string): Promise<AccountDetails | undefined> {
    return accountDetails(this.client, accountId);
  }

  /** Written by a round of the account (the name and threshold live in its money row); a rename moves its listing row around it. */
  async updateAccount(accountId: string, change: AccountChange): Promise<AccountDetails | undefined> {
    const before = await accountDetails(this.client, accountId);
    if (!before) return undefined;
    let outcome: unknown;
    const write = async () => {
      outcome = await this.queue.enqueue(accountId, { kind: "settings", change });
    };
    if (change.name !== undefined) await relistAccount(this.client, accountId, before.name, change.name, write);
    else await write();
    return outcome === "unknown_account" ? undefined : accountDetails(this.client, accountId);
  }

  async hasAnyAccount(): Promise<boolean> {
    return (
      (await this.client.execute("SELECT account_id FROM account_ledger LIMIT 1")).rowLength > 0 ||
      (await this.client.execute("SELECT account_id FROM accounts LIMIT 1")).rowLength > 0
    );
  }

  async keyAccount(accountId: string, keyId: string): Promise<KeyAccount> {
    const state = await this.rows.read(accountId);
    if (!state) return { spending: NO_SPENDING, held: 0n, openJobs: 0 };
    return { spending: spendingOf(state, keyId), ...keyHolds(state, keyId) };
  }

  /** The balance.low alerts rounds wrote and the webhooks role has not handed over (BalanceAlertIndex). */
  pendingBalanceAlerts(limit: number): Promise<BalanceAlert[]> {
    return this.alerts.pending(limit);
  }

  removeBalanceAlert(alertId: string): Promise<void> {
    return this.alerts.remove(alertId);
  }

  /** The account's statement, newest first (LedgerStatement.entries). */
  entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    return this.statement.entries(query);
  }
}

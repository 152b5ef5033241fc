import type { AccountState } from "./account-state.js";

/**
 * What a process keeps of the rows its rounds last wrote: at most this many
 * accounts, and this many known holds over them all (each some 200 bytes
 * with its memo: about 40 MB), the account written longest ago forgotten
 * first. An account that alone knows more is not kept: its next round reads
 * its money row and the holds it names.
 */
const MAX_WRITTEN_ACCOUNTS = 1_000;
export const MAX_WRITTEN_HOLDS = 200_000;

/** The rows this process's rounds last wrote, bounded by accounts and by open holds. */
export class WrittenRows {
  private readonly rows = new Map<string, AccountState>();
  private holds = 0;

  constructor(private readonly maxHolds: number) {}

  /** The account's row as last written here, taken out (a round puts back the row it leaves). */
  take(accountId: string): AccountState | undefined {
    const row = this.rows.get(accountId);
    if (row) {
      this.rows.delete(accountId);
      this.holds -= row.holds.size;
    }
    return row;
  }

  keep(accountId: string, row: AccountState): void {
    this.take(accountId);
    if (row.holds.size > this.maxHolds) return;
    while (this.rows.size >= MAX_WRITTEN_ACCOUNTS || this.holds + row.holds.size > this.maxHolds) this.take(this.rows.keys().next().value!);
    this.rows.set(accountId, row);
    this.holds += row.holds.size;
  }
}

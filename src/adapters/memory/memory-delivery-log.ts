import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState, DeliverySubject } from "../../ports/delivery-log.js";

/** The most recently attempted first. */
export const byLastAttempt = (a: DeliveryRecord, b: DeliveryRecord) =>
  (b.attempts.at(-1)?.at.getTime() ?? 0) - (a.attempts.at(-1)?.at.getTime() ?? 0) || a.messageId.localeCompare(b.messageId);

export class MemoryDeliveryLog implements DeliveryLog {
  private readonly records = new Map<string, DeliveryRecord>();

  async get(messageId: string) { return this.records.get(messageId); }

  async recordAttempt(messageId: string, subject: DeliverySubject, attempt: DeliveryAttempt): Promise<void> {
    const record = this.records.get(messageId) ?? { messageId, ...subject, state: "pending" as const, attempts: [] };
    this.records.set(messageId, {
      ...record, jobId: record.jobId || subject.jobId, accountId: record.accountId || subject.accountId, attempts: [...record.attempts, attempt],
    });
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    const record = this.records.get(messageId);
    if (record && record.state !== "pending") return false;
    this.records.set(messageId, { ...(record ?? { messageId, jobId: "", accountId: "", attempts: [] }), state });
    return true;
  }

  async redelivered(messageId: string): Promise<boolean> {
    const record = this.records.get(messageId);
    if (!record || record.state === "delivered") return false;
    this.records.set(messageId, { ...record, state: "delivered" });
    return true;
  }

  async listByAccount(accountId: string, limit: number): Promise<DeliveryRecord[]> {
    return [...this.records.values()].filter((record) => record.accountId === accountId).sort(byLastAttempt).slice(0, limit);
  }

  async listExhausted(limit: number): Promise<DeliveryRecord[]> {
    return [...this.records.values()].filter((record) => record.state === "exhausted" && record.jobId !== "").sort(byLastAttempt).slice(0, limit);
  }
}

import type { DeliveryAttempt, DeliveryLog, DeliveryRecord, DeliveryState } from "../../ports/delivery-log.js";

export class MemoryDeliveryLog implements DeliveryLog {
  private readonly records = new Map<string, DeliveryRecord>();

  async get(messageId: string) { return this.records.get(messageId); }

  async recordAttempt(messageId: string, jobId: string, attempt: DeliveryAttempt): Promise<void> {
    const record = this.records.get(messageId) ?? { messageId, jobId, state: "pending" as const, attempts: [] };
    this.records.set(messageId, { ...record, attempts: [...record.attempts, attempt] });
  }

  async finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean> {
    const record = this.records.get(messageId);
    if (record && record.state !== "pending") return false;
    this.records.set(messageId, { ...(record ?? { messageId, jobId: "", attempts: [] }), state });
    return true;
  }
}

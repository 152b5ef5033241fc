export interface DeliveryAttempt {
  readonly at: Date;
  readonly url: string;
  readonly status?: number;
  readonly error?: string;
}

export type DeliveryState = "pending" | "delivered" | "exhausted";

export interface DeliveryRecord {
  readonly messageId: string;
  /** The job it reports; "" for a test event. */
  readonly jobId: string;
  /** The account whose webhook it is ("" for a delivery recorded before accounts were kept with it). */
  readonly accountId: string;
  readonly state: DeliveryState;
  readonly attempts: readonly DeliveryAttempt[];
}

/** What a delivery is about. */
export interface DeliverySubject {
  /** "" for a test event. */
  readonly jobId: string;
  readonly accountId: string;
}

/** Webhook deliveries per message; "delivered" is final, so a 2xx is never followed by another send. */
export interface DeliveryLog {
  get(messageId: string): Promise<DeliveryRecord | undefined>;
  recordAttempt(messageId: string, subject: DeliverySubject, attempt: DeliveryAttempt): Promise<void>;
  /** Compare-and-set from pending; false when already final. */
  finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean>;
  /**
   * A redelivery someone asked for went through: pending or exhausted becomes
   * delivered (it leaves the dead letters). False when it was delivered already.
   */
  redelivered(messageId: string): Promise<boolean>;
  /** The account's deliveries, the most recently attempted first, at most `limit`. */
  listByAccount(accountId: string, limit: number): Promise<DeliveryRecord[]>;
  /** The dead letters: job deliveries that exhausted their retries (not test events), the most recently attempted first, at most `limit`. */
  listExhausted(limit: number): Promise<DeliveryRecord[]>;
}

export interface DeliveryAttempt {
  readonly at: Date;
  readonly url: string;
  readonly status?: number;
  readonly error?: string;
}

export type DeliveryState = "pending" | "delivered" | "exhausted";

export interface DeliveryRecord {
  readonly messageId: string;
  readonly jobId: string;
  readonly state: DeliveryState;
  readonly attempts: readonly DeliveryAttempt[];
}

/** Webhook deliveries per message; "delivered" is final, so a 2xx is never followed by another send. */
export interface DeliveryLog {
  get(messageId: string): Promise<DeliveryRecord | undefined>;
  recordAttempt(messageId: string, jobId: string, attempt: DeliveryAttempt): Promise<void>;
  /** Compare-and-set from pending; false when already final. */
  finish(messageId: string, state: Exclude<DeliveryState, "pending">): Promise<boolean>;
}

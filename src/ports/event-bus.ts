/** Topics of the job lifecycle. Events are keyed by job id. */
export const TOPICS = {
  generationRequested: "generation.requested",
  jobFinished: "job.finished",
  webhookDelivery: "webhook.delivery",
  /** Webhook deliveries that exhausted their retries; kept for operators. */
  webhookDeadLetter: "webhook.dead-letter",
} as const;

export type Topic = (typeof TOPICS)[keyof typeof TOPICS];

export interface PublishOptions {
  /** Deliver no earlier than this many milliseconds from now (retries with backoff). */
  readonly delayMs?: number;
}

export type EventHandler<T> = (event: T) => Promise<void>;

export interface Subscription {
  close(): Promise<void>;
}

/**
 * At-least-once delivery to each consumer group. Handlers must be idempotent;
 * a handler that throws gets the event again later.
 */
export interface EventBus {
  publish<T>(topic: Topic, key: string, event: T, options?: PublishOptions): Promise<void>;
  subscribe<T>(topic: Topic, group: string, handler: EventHandler<T>): Promise<Subscription>;
  close(): Promise<void>;
}

import type { EventBus, EventHandler, PublishOptions, Subscription, Topic } from "../../ports/event-bus.js";

interface Group {
  handler: EventHandler<unknown>;
  active: boolean;
}

/**
 * The embedded bus: each published event goes to every consumer group of its
 * topic on a later tick. A handler that throws gets the event again after a
 * short backoff, like an uncommitted Kafka offset.
 */
export class InProcessEventBus implements EventBus {
  private readonly groups = new Map<Topic, Map<string, Group>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly options: { redeliveryDelayMs?: number; onHandlerError?: (topic: Topic, error: unknown) => void } = {},
  ) {}

  async publish<T>(topic: Topic, _key: string, event: T, options: PublishOptions = {}): Promise<void> {
    if (this.closed) throw new Error("event bus is closed");
    for (const group of this.groups.get(topic)?.values() ?? []) this.schedule(topic, group, event, options.delayMs ?? 0);
  }

  async subscribe<T>(topic: Topic, name: string, handler: EventHandler<T>): Promise<Subscription> {
    const groups = this.groups.get(topic) ?? new Map<string, Group>();
    this.groups.set(topic, groups);
    if (groups.has(name)) throw new Error(`group ${name} already subscribed to ${topic}`);
    const group: Group = { handler: handler as EventHandler<unknown>, active: true };
    groups.set(name, group);
    return {
      close: async () => {
        group.active = false;
        groups.delete(name);
      },
    };
  }

  /** Stops timers and waits for handlers already running. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  private schedule(topic: Topic, group: Group, event: unknown, delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!group.active || this.closed) return;
      const run = group.handler(event).catch((error: unknown) => {
        this.options.onHandlerError?.(topic, error);
        if (group.active && !this.closed) this.schedule(topic, group, event, this.options.redeliveryDelayMs ?? 200);
      });
      this.inFlight.add(run);
      void run.finally(() => this.inFlight.delete(run));
    }, delayMs);
    this.timers.add(timer);
  }
}

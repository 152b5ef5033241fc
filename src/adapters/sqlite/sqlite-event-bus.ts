import type { EventBus, EventHandler, PublishOptions, Subscription, Topic } from "../../ports/event-bus.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import { consumeInSpan, injectTraceContext } from "../observability/tracing.js";

export interface SqliteEventBusOptions {
  /** Delay before a handler that threw sees its event again. Default 200 ms, like the in-memory bus. */
  readonly redeliveryDelayMs?: number;
  readonly onHandlerError?: (topic: Topic, error: unknown) => void;
  /** The clock of due times (tests). */
  readonly now?: () => number;
}

interface Pending {
  readonly eventId: number;
  readonly payload: string;
  /** The trace context the event was published in (JSON of traceparent, tracestate), when tracing was on. */
  readonly trace: string | null;
  dueAt: number;
}

interface Consumer {
  readonly topic: Topic;
  readonly group: string;
  readonly handler: EventHandler<unknown>;
  readonly timers: Map<number, NodeJS.Timeout>;
  active: boolean;
}

/** setTimeout cannot wait longer than this; a later event is re-armed when the timer fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const groupKey = (topic: string, group: string) => `${topic}\u0000${group}`;

/**
 * The embedded bus, durable: the same in-process delivery as
 * InProcessEventBus (every consumer group of a topic gets each event on a
 * later tick, at least once, a handler that throws gets it again after
 * `redeliveryDelayMs`, `delayMs` honoured), with nothing held only in memory.
 *
 * Every consumer group a subscribe ever registered is a row of bus_groups;
 * publish writes one bus_events row per registered group of the topic (so a
 * group not subscribed in this run yet still gets the event once it is), with
 * its due time. A handler that succeeds deletes its row; one that throws moves
 * the row's due time. subscribe schedules every row of its topic and group,
 * so after a crash or a restart pending events resume, webhook retries due in
 * hours included. Events of a topic no group ever subscribed to are dropped.
 */
export class SqliteEventBus implements EventBus {
  private readonly consumers = new Map<string, Consumer>();
  /** Event ids whose handler is running, per topic and group (a re-subscription must not start them twice). */
  private readonly running = new Map<string, Set<number>>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly statements;
  private readonly now: () => number;
  private closed = false;

  constructor(
    db: SqliteDb,
    private readonly options: SqliteEventBusOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.statements = {
      register: db.prepare("INSERT OR IGNORE INTO bus_groups (topic, group_name, registered_at) VALUES (?, ?, ?)"),
      publish: db.prepare(
        `INSERT INTO bus_events (topic, group_name, event_key, payload, due_at, published_at, trace)
         SELECT topic, group_name, @key, @payload, @due_at, @published_at, @trace FROM bus_groups WHERE topic = @topic
         RETURNING event_id, group_name`,
      ),
      pending: db.prepare(
        "SELECT event_id, payload, due_at, trace FROM bus_events WHERE topic = ? AND group_name = ? ORDER BY due_at, event_id",
      ),
      delivered: db.prepare("DELETE FROM bus_events WHERE event_id = ?"),
      retry: db.prepare("UPDATE bus_events SET due_at = ?, attempts = attempts + 1 WHERE event_id = ?"),
    };
  }

  async publish<T>(topic: Topic, key: string, event: T, options: PublishOptions = {}): Promise<void> {
    if (this.closed) throw new Error("event bus is closed");
    const publishedAt = this.now();
    const payload = JSON.stringify(event);
    const dueAt = publishedAt + Math.max(0, options.delayMs ?? 0);
    const carried = injectTraceContext({});
    const trace = Object.keys(carried).length > 0 ? JSON.stringify(carried) : null;
    const rows = sqliteCall(() =>
      this.statements.publish.all({ topic, key, payload, due_at: dueAt, published_at: publishedAt, trace }),
    ) as { event_id: number; group_name: string }[];
    for (const row of rows) {
      const consumer = this.consumers.get(groupKey(topic, row.group_name));
      if (consumer) this.schedule(consumer, { eventId: row.event_id, payload, trace, dueAt });
    }
  }

  async subscribe<T>(topic: Topic, group: string, handler: EventHandler<T>): Promise<Subscription> {
    if (this.closed) throw new Error("event bus is closed");
    const key = groupKey(topic, group);
    if (this.consumers.has(key)) throw new Error(`group ${group} already subscribed to ${topic}`);
    const rows = sqliteCall(() => {
      this.statements.register.run(topic, group, this.now());
      return this.statements.pending.all(topic, group);
    }) as { event_id: number; payload: string; due_at: number; trace: string | null }[];
    const consumer: Consumer = { topic, group, handler: handler as EventHandler<unknown>, timers: new Map(), active: true };
    this.consumers.set(key, consumer);
    const running = this.running.get(key);
    for (const row of rows) {
      if (!running?.has(row.event_id)) this.schedule(consumer, { eventId: row.event_id, payload: row.payload, trace: row.trace, dueAt: row.due_at });
    }
    return {
      close: async () => {
        if (!consumer.active) return;
        consumer.active = false;
        for (const timer of consumer.timers.values()) clearTimeout(timer);
        consumer.timers.clear();
        if (this.consumers.get(key) === consumer) this.consumers.delete(key);
      },
    };
  }

  /** Stops timers and waits for the handlers already running (and the rows they update). */
  async close(): Promise<void> {
    this.closed = true;
    for (const consumer of this.consumers.values()) {
      consumer.active = false;
      for (const timer of consumer.timers.values()) clearTimeout(timer);
      consumer.timers.clear();
    }
    this.consumers.clear();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private schedule(consumer: Consumer, pending: Pending): void {
    if (!consumer.active || this.closed) return;
    clearTimeout(consumer.timers.get(pending.eventId));
    const wait = Math.max(0, pending.dueAt - this.now());
    const timer = setTimeout(() => {
      consumer.timers.delete(pending.eventId);
      if (!consumer.active || this.closed) return;
      if (pending.dueAt > this.now()) this.schedule(consumer, pending); // a wait longer than one timer can hold
      else this.deliver(consumer, pending);
    }, Math.min(wait, MAX_TIMER_MS));
    consumer.timers.set(pending.eventId, timer);
  }

  private deliver(consumer: Consumer, pending: Pending): void {
    const key = groupKey(consumer.topic, consumer.group);
    const running = this.running.get(key) ?? new Set<number>();
    this.running.set(key, running);
    if (running.has(pending.eventId)) return;
    running.add(pending.eventId);
    const run = (async () => {
      let delivered = true;
      try {
        const event = JSON.parse(pending.payload) as unknown;
        if (pending.trace) {
          const headers = JSON.parse(pending.trace) as Record<string, string>;
          await consumeInSpan(`${consumer.topic} process`, headers, { "messaging.system": "sqlite", "messaging.consumer.group.name": consumer.group }, () =>
            Promise.resolve(consumer.handler(event)),
          );
        } else {
          await consumer.handler(event);
        }
      } catch (error) {
        delivered = false;
        this.options.onHandlerError?.(consumer.topic, error);
      }
      const dueAt = this.now() + (this.options.redeliveryDelayMs ?? 200);
      let again = !delivered;
      try {
        const result = sqliteCall(() =>
          delivered ? this.statements.delivered.run(pending.eventId) : this.statements.retry.run(dueAt, pending.eventId),
        );
        if (!delivered && result.changes === 0) again = false; // the row is gone: nothing left to deliver
      } catch (error) {
        // The row still says "pending": deliver again (at least once) rather than lose or stall the event.
        this.options.onHandlerError?.(consumer.topic, error);
        again = true;
      } finally {
        running.delete(pending.eventId);
        if (running.size === 0 && this.running.get(key) === running) this.running.delete(key);
      }
      // The group may have been closed and subscribed again meanwhile: the current subscription takes it.
      const current = this.consumers.get(key);
      if (again && current) this.schedule(current, { ...pending, dueAt });
    })();
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }
}

/** The durable in-process bus on an open embedded database. */
export function createSqliteEventBus(db: SqliteDb, options: SqliteEventBusOptions = {}): SqliteEventBus {
  return new SqliteEventBus(db, options);
}

import type { EventBus, EventHandler, PublishOptions, Subscription, Topic } from "../../ports/event-bus.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import { consumeInSpan, injectTraceContext } from "../observability/tracing.js";

export interface SqliteEventBusOptions {
  /** Delay before a handler that threw sees its event again. Default 200 ms, like the in-memory bus. */
  readonly redeliveryDelayMs?: number;
  /**
   * Handlers running at once per consumer group (default 128). Further due
   * events wait in the database, not in memory, and are read as handlers end.
   */
  readonly maxInFlightPerGroup?: number;
  readonly onHandlerError?: (topic: Topic, error: unknown) => void;
  /** The clock of due times (tests). */
  readonly now?: () => number;
}

interface DueRow {
  readonly event_id: number;
  readonly payload: string;
  /** The trace context the event was published in (JSON of traceparent, tracestate), when tracing was on. */
  readonly trace: string | null;
}

interface Consumer {
  readonly key: string;
  readonly topic: Topic;
  readonly group: string;
  readonly handler: EventHandler<unknown>;
  active: boolean;
  /** The one timer of the group: its next due event, or a retry after the database failed. */
  timer?: NodeJS.Timeout;
  /** A fill is scheduled for the next turn of the event loop (publishes and ends in one turn share it). */
  kicked: boolean;
}

/** setTimeout cannot wait longer than this; a later event is re-armed when the timer fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const DEFAULT_MAX_IN_FLIGHT = 128;

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
 * the row's due time. Events of a topic no group ever subscribed to are dropped.
 *
 * Delivery is a window per group: at most `maxInFlightPerGroup` handlers
 * run at once, fed from the database in due order (oldest first) as they
 * end, and one timer waits for the group's next due event. A backlog of any
 * depth therefore costs rows, not heap: after a crash or a restart pending
 * events resume from the table, webhook retries due in hours included.
 */
export class SqliteEventBus implements EventBus {
  private readonly consumers = new Map<string, Consumer>();
  /** Event ids whose handler is running, per topic and group (a re-subscription must not start them twice). */
  private readonly running = new Map<string, Set<number>>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly statements;
  private readonly now: () => number;
  private readonly window: number;
  private readonly redeliveryDelayMs: number;
  private closed = false;

  constructor(
    db: SqliteDb,
    private readonly options: SqliteEventBusOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.window = Math.max(1, options.maxInFlightPerGroup ?? DEFAULT_MAX_IN_FLIGHT);
    this.redeliveryDelayMs = options.redeliveryDelayMs ?? 200;
    this.statements = {
      register: db.prepare("INSERT OR IGNORE INTO bus_groups (topic, group_name, registered_at) VALUES (?, ?, ?)"),
      publish: db.prepare(
        `INSERT INTO bus_events (topic, group_name, event_key, payload, due_at, published_at, trace)
         SELECT topic, group_name, @key, @payload, @due_at, @published_at, @trace FROM bus_groups WHERE topic = @topic
         RETURNING group_name`,
      ),
      due: db.prepare(
        "SELECT event_id, payload, trace FROM bus_events WHERE topic = ? AND group_name = ? AND due_at <= ? ORDER BY due_at, event_id LIMIT ?",
      ),
      nextDue: db.prepare("SELECT min(due_at) FROM bus_events WHERE topic = ? AND group_name = ? AND due_at > ?").pluck(),
      delivered: db.prepare("DELETE FROM bus_events WHERE event_id = ?"),
      retry: db.prepare("UPDATE bus_events SET due_at = ?, attempts = attempts + 1 WHERE event_id = ?"),
    };
  }

  async publish<T>(topic: Topic, key: string, event: T, options: PublishOptions = {}): Promise<void> {
    const groups = sqliteCall(() => this.publishNow(topic, key, event, options));
    this.published(topic, groups);
  }

  /**
   * publish's write, synchronous, for a caller's transaction on the same
   * database (SqliteAcceptanceWrites): returns the groups it reached, whose
   * consumers the caller wakes with `published` once the transaction has committed.
   */
  publishNow<T>(topic: Topic, key: string, event: T, options: PublishOptions = {}): string[] {
    if (this.closed) throw new Error("event bus is closed");
    const publishedAt = this.now();
    const dueAt = publishedAt + Math.max(0, options.delayMs ?? 0);
    const carried = injectTraceContext({});
    const trace = Object.keys(carried).length > 0 ? JSON.stringify(carried) : null;
    const rows = this.statements.publish.all({ topic, key, payload: JSON.stringify(event), due_at: dueAt, published_at: publishedAt, trace }) as { group_name: string }[];
    return rows.map((row) => row.group_name);
  }

  /** Wakes the consumers of `groups` (publishNow's answer), for events committed on `topic`. */
  published(topic: Topic, groups: readonly string[]): void {
    for (const group of groups) {
      const consumer = this.consumers.get(groupKey(topic, group));
      if (consumer) this.kick(consumer);
    }
  }

  async subscribe<T>(topic: Topic, group: string, handler: EventHandler<T>): Promise<Subscription> {
    if (this.closed) throw new Error("event bus is closed");
    const key = groupKey(topic, group);
    if (this.consumers.has(key)) throw new Error(`group ${group} already subscribed to ${topic}`);
    sqliteCall(() => this.statements.register.run(topic, group, this.now()));
    const consumer: Consumer = { key, topic, group, handler: handler as EventHandler<unknown>, active: true, kicked: false };
    this.consumers.set(key, consumer);
    this.kick(consumer);
    return {
      close: async () => {
        if (!consumer.active) return;
        this.stop(consumer);
        if (this.consumers.get(key) === consumer) this.consumers.delete(key);
      },
    };
  }

  /** Stops timers and waits for the handlers already running (and the rows they update). */
  async close(): Promise<void> {
    this.closed = true;
    for (const consumer of this.consumers.values()) this.stop(consumer);
    this.consumers.clear();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private stop(consumer: Consumer): void {
    consumer.active = false;
    clearTimeout(consumer.timer);
    consumer.timer = undefined;
  }

  private runningOf(key: string): Set<number> {
    let running = this.running.get(key);
    if (!running) this.running.set(key, (running = new Set()));
    return running;
  }

  /** Fills the group's window on the next turn (once, however many publishes and ends ask for it meanwhile). */
  private kick(consumer: Consumer): void {
    if (consumer.kicked) return;
    consumer.kicked = true;
    setImmediate(() => {
      consumer.kicked = false;
      this.fill(consumer);
    });
  }

  /**
   * Starts the group's due events, oldest first, while its window has room;
   * when every due event is taken, arms the group's timer for its next one.
   * A full window does nothing: each handler's end fills it again.
   */
  private fill(consumer: Consumer): void {
    if (!consumer.active || this.closed) return;
    const running = this.runningOf(consumer.key);
    const room = this.window - running.size;
    if (room <= 0) return;
    const limit = room + running.size; // running events are still rows: read past them
    let rows: DueRow[];
    let next: number | null = null;
    const now = this.now();
    try {
      rows = this.statements.due.all(consumer.topic, consumer.group, now, limit) as DueRow[];
      if (rows.length < limit) next = this.statements.nextDue.get(consumer.topic, consumer.group, now) as number | null;
    } catch (error) {
      this.options.onHandlerError?.(consumer.topic, error);
      this.arm(consumer, now + this.redeliveryDelayMs);
      return;
    }
    let started = 0;
    for (const row of rows) {
      if (started === room) break;
      if (running.has(row.event_id)) continue;
      this.deliver(consumer, running, row);
      started++;
    }
    if (rows.length < limit) this.arm(consumer, next);
  }

  /** One timer per group, for `dueAt` (none when nothing is pending later). */
  private arm(consumer: Consumer, dueAt: number | null): void {
    clearTimeout(consumer.timer);
    consumer.timer = undefined;
    if (dueAt === null || !consumer.active || this.closed) return;
    const wait = Math.min(Math.max(0, dueAt - this.now()), MAX_TIMER_MS); // a later event re-arms when this fires
    consumer.timer = setTimeout(() => {
      consumer.timer = undefined;
      this.fill(consumer);
    }, wait);
  }

  private deliver(consumer: Consumer, running: Set<number>, row: DueRow): void {
    running.add(row.event_id);
    const run = (async () => {
      let delivered = true;
      try {
        const event = JSON.parse(row.payload) as unknown;
        if (row.trace) {
          const headers = JSON.parse(row.trace) as Record<string, string>;
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
      let retryAt: number | undefined;
      try {
        const retry = this.now() + this.redeliveryDelayMs;
        sqliteCall(() => (delivered ? this.statements.delivered.run(row.event_id) : this.statements.retry.run(retry, row.event_id)));
      } catch (error) {
        // The row still says "pending" and due: deliver it again (at least once) after the delay, rather than lose it or spin.
        this.options.onHandlerError?.(consumer.topic, error);
        retryAt = this.now() + this.redeliveryDelayMs;
      } finally {
        running.delete(row.event_id);
        if (running.size === 0 && this.running.get(consumer.key) === running) this.running.delete(consumer.key);
      }
      // The group may have been closed and subscribed again meanwhile: the current subscription takes it.
      const current = this.consumers.get(consumer.key);
      if (!current) return;
      if (retryAt === undefined) this.kick(current);
      else this.arm(current, retryAt);
    })();
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }
}

/** The durable in-process bus on an open embedded database. */
export function createSqliteEventBus(db: SqliteDb, options: SqliteEventBusOptions = {}): SqliteEventBus {
  return new SqliteEventBus(db, options);
}

import type { AcceptanceWrites } from "../../../ports/acceptance-writes.js";
import { TOPICS, type EventBus, type PublishOptions, type Topic } from "../../../ports/event-bus.js";

/**
 * With the simulated provider a job would leave `queued` on the next tick,
 * so nobody could ever see it queued. This bus decorator holds each new job in
 * the queue for the simulated latency, making `queued` observable as well as
 * `processing` (SIMULATED_LATENCY_MS covers both).
 */
export function withSimulatedQueueTime(bus: EventBus, queueMs: number): EventBus {
  if (queueMs <= 0) return bus;
  return {
    publish<T>(topic: Topic, key: string, event: T, options: PublishOptions = {}) {
      const delayMs = topic === TOPICS.generationRequested ? Math.max(options.delayMs ?? 0, queueMs) : options.delayMs;
      return bus.publish(topic, key, event, { ...options, delayMs });
    },
    subscribe: (topic, group, handler) => bus.subscribe(topic, group, handler),
    close: () => bus.close(),
  };
}

/** The same queue time for announcements that an accepted job's one write publishes (AcceptanceWrites). */
export function acceptanceWithSimulatedQueueTime(writes: AcceptanceWrites, queueMs: number): AcceptanceWrites {
  if (queueMs <= 0) return writes;
  return {
    accept: (job, hold, announcement) =>
      writes.accept(job, hold, announcement.topic === TOPICS.generationRequested
        ? { ...announcement, options: { ...announcement.options, delayMs: Math.max(announcement.options?.delayMs ?? 0, queueMs) } }
        : announcement),
  };
}

import type { PublishOptions, Topic } from "../../ports/event-bus.js";
import { DependencyUnavailableError } from "../../ports/dependency.js";
import type { Telemetry } from "../../ports/telemetry.js";
import { publishRaw } from "./delayed-delivery.js";
import { describe, within, type KafkaBusContext } from "./kafka-connection.js";

/**
 * EventBus.publish on Kafka, bounded by `publishTimeoutMs`: past it, it fails with
 * DependencyUnavailableError and the caller decides (announce later, answer 503);
 * kafkajs may still deliver it, which at-least-once allows.
 */
export async function publishEvent<T>(
  bus: KafkaBusContext, telemetry: Telemetry, publishTimeoutMs: number, topic: Topic, key: string, event: T, options: PublishOptions,
): Promise<void> {
  if (bus.state.closed) throw new Error("event bus is closed");
  // Whatever kafkajs throws (a lost connection, retries exhausted) means "Kafka cannot take it now".
  const started = performance.now();
  const sent = publishRaw(bus, `${bus.prefix}${topic}`, key, JSON.stringify(event) ?? "null", options.delayMs ?? 0).catch((error: unknown) => {
    throw new DependencyUnavailableError("kafka", `Kafka refused the event: ${describe(error)}`, { cause: error });
  });
  sent.catch(() => undefined); // a late failure after the bound below is nobody's to hear
  let taken: boolean;
  try {
    taken = await within(sent, publishTimeoutMs);
  } catch (error) {
    telemetry.observe({ kind: "bus_publish", topic, ok: false, seconds: (performance.now() - started) / 1000 });
    throw error;
  }
  telemetry.observe({ kind: "bus_publish", topic, ok: taken, seconds: (performance.now() - started) / 1000 });
  if (!taken) throw new DependencyUnavailableError("kafka", `Kafka did not take the event within ${publishTimeoutMs} ms`);
}

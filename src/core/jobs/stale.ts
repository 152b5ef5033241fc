import type { CoreSettings } from "../core-deps.js";

/**
 * Work begun before this instant and still unfinished was abandoned by a
 * process that died: older than the acceptance bound, or (when this process
 * owns its store alone, as the embedded default does) begun before this
 * process started.
 */
export function staleBefore(settings: Pick<CoreSettings, "acceptTimeoutMs" | "ownsStoreSince">, now: Date): Date {
  const bound = now.getTime() - settings.acceptTimeoutMs;
  return new Date(Math.max(bound, settings.ownsStoreSince?.getTime() ?? Number.NEGATIVE_INFINITY));
}

import { createContextKey } from "@connectrpc/connect";

/**
 * How a transport tells the core that a call's answer could not be
 * delivered: the connection or stream was gone before the answer was written
 * whole. Only the transport knows; it calls `undelivered` once, at that moment
 * (at once if it already happened), and never for an answer it wrote whole.
 */
export interface AnswerDelivery {
  onUndelivered(undelivered: () => void): void;
}

/** A call's AnswerDelivery, set by the transport that serves it (none: the core relies on the call's signal alone). */
export const ANSWER_DELIVERY = createContextKey<AnswerDelivery | undefined>(undefined, { description: "whether the call's answer was delivered" });

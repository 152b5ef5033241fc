import { createContextKey } from "@connectrpc/connect";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";

/**
 * Where a caller collects the time the provider took while it waited
 * (Server-Timing's `upstream`): the core adds the time it spent waiting for
 * each of the provider's chunks. Undefined until a provider was called.
 */
export interface UpstreamTime {
  upstreamMs?: number;
}

/** The call's UpstreamTime, when its caller wants the provider's time (see PROVIDER_METHODS). */
export const UPSTREAM_TIME = createContextKey<UpstreamTime | undefined>(undefined, { description: "the provider's time" });

/** The methods that call the provider while their caller waits: the only ones whose callers need UPSTREAM_TIME. */
export const PROVIDER_METHODS: ReadonlySet<object> = new Set([TextService.method.generateContent, TextService.method.streamGenerateContent]);

/**
 * The core's public entry point: everything the edges (src/transport) may
 * know of the core, and of the domain behind it. The edges import this module
 * only, never a file under core/ or domain/ (.dependency-cruiser.cjs,
 * `npm run lint:deps`): what is not listed here can move or change without
 * touching them. Add to it only what an edge needs to call the core or to
 * refuse a request the same way the core would.
 */

// The core as a caller sees it: clients of the generated services.
export type { CoreClients } from "./core-clients.js";

// Whether the process can serve (the gate in front of every route, /readyz, gRPC health).
export type { Readiness } from "./health/readiness.js";

// Credentials checked from a call's headers before its body is read.
export type { Credential, HeaderCheck } from "./auth/header-check.js";
// The caller's address, handed to the core's failed-credential guard.
export { CLIENT_ADDRESS } from "./auth/credential-guard.js";

// Call context the edges set and read: whether an answer reached its client, the provider's share of the time.
export { ANSWER_DELIVERY, type AnswerDelivery } from "./jobs/answer-delivery.js";
export { upstreamTimeOf } from "./text/upstream-time.js";

// Inline images staged into the blob store while a large request arrives (the gateway beside the core).
export { STAGED_IMAGES, type ImageUpload, type InlineStaging, type StagingSession } from "./jobs/inline-staging.js";

// Errors: the domain's, and their RPC form.
export { toConnectError } from "./errors/rpc-errors.js";
export { BAD_REQUEST_REASONS, DomainError } from "../domain/errors/domain-error.js";
// The reasons of a provider's failures: the edges answer them as upstream failures (502 on REST).
export { PROVIDER_FAILURES } from "../ports/provider.js";

// Domain rules the edges check on raw input before converting it (the same rules, the same refusals as the core's).
export { DEFAULT_LIMITS, type ValidationLimits } from "../domain/validation/limits.js";
export { checkMetadata, checkMetadataShape, type MetadataLimits } from "../domain/validation/metadata.js";
export type { StagedInlineImage } from "../domain/validation/inline-images.js";
export { checkLimit, checkStatus } from "../domain/jobs/job-list.js";
export { checkGrouping } from "../domain/ledger/usage.js";
export { checkEntrySource, checkEntryType } from "../domain/ledger/statement.js";
export { createHealthService } from "./health/health-service.js";

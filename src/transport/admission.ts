import type { EdgeLimits } from "../config/config.js";
import type { Credential, HeaderCheck, Readiness, ValidationLimits } from "../core/index.js";
import type { BodyBudget, BodyHold, ReleaseSlot, UploadSlots } from "./upload-slots.js";

// Both ports' admission: readiness and credential before a body is read, then what the body holds of the process's
// limits; each protocol keeps a thin hook (http/edge/body-guard.ts, rpc/rpc-admission.ts) and its refusals' shape.

/** Retry-After of too_many_uploads: an upload slot frees in seconds. */
export const UPLOAD_RETRY_AFTER_SECONDS = 2;
/** Retry-After of server_busy for want of body memory: bodies being received are read within a second or so. */
export const BODY_MEMORY_RETRY_AFTER_SECONDS = 1;

/** Why a body is not read (further); each protocol answers it in its own shape. */
export type BodyRefusal =
  | { readonly kind: "too_large"; readonly limit: number; readonly size: number }
  | { readonly kind: "too_many_uploads" }
  | { readonly kind: "no_body_memory" };

export interface AdmissionLimits {
  readonly edge: Pick<EdgeLimits, "largeUploadBytes">;
  readonly uploadSlots: Pick<UploadSlots, "tryTake">;
  readonly bodyBudget: Pick<BodyBudget, "open">;
}

/** What one request's body (message) holds, up to `limit` bytes: a slot once it is large, its bytes of body memory. */
export class BodyAdmission {
  private slot: ReleaseSlot | undefined;
  private memory: BodyHold | undefined;
  private ended = false;

  constructor(private readonly limits: AdmissionLimits, readonly limit: number) {}

  /** A body of `size` bytes taking `memory` more: refused over the limit, then large with no slot, then short of memory. */
  hold(size: number, memory: number): BodyRefusal | undefined {
    if (this.ended) return undefined;
    if (size > this.limit) return { kind: "too_large", limit: this.limit, size };
    return (size > this.limits.edge.largeUploadBytes ? this.takeSlot() : undefined) ?? this.take(memory);
  }

  /** An upload slot, for a body that may be large though it announced no size (images on a chunked body). */
  takeSlot(): BodyRefusal | undefined {
    if (this.ended || this.slot !== undefined) return undefined;
    this.slot = this.limits.uploadSlots.tryTake();
    return this.slot === undefined ? { kind: "too_many_uploads" } : undefined;
  }

  /** `bytes` more of body memory; refused, it gives back everything held. */
  take(bytes: number): BodyRefusal | undefined {
    if (this.ended || bytes <= 0 || (this.memory ??= this.limits.bodyBudget.open()).take(bytes)) return undefined;
    this.release();
    return { kind: "no_body_memory" };
  }

  /** The body is over: everything goes back, and what still arrives (discarded) takes nothing. */
  end(): void {
    this.release();
    this.ended = true;
  }

  /** Gives back the slot and the memory (a client stream's message, whole); later messages take their own. */
  release(): void {
    this.slot?.();
    this.slot = undefined;
    this.memory?.release();
    this.memory = undefined;
  }
}

/** What a request needs before a byte of its body is read: its credential (undefined: public), and whether it is served while not ready. */
export interface HeaderAdmission {
  readonly credential: Credential | undefined;
  readonly servedWhileNotReady: boolean;
}

/** Readiness, then the credential, from the headers alone; the check's refusal is handed back as thrown. */
export async function admitHeaders(
  admission: HeaderAdmission,
  settings: { readonly readiness?: Readiness; readonly headerCheck: HeaderCheck },
  headers: Headers,
  client: string | undefined,
): Promise<{ readonly refused: "not_serving" } | { readonly refused: "credential"; readonly error: unknown } | undefined> {
  if (!admission.servedWhileNotReady && settings.readiness && !settings.readiness.current.serving) return { refused: "not_serving" };
  if (admission.credential === undefined) return undefined;
  try {
    await settings.headerCheck(headers, admission.credential, client);
    return undefined;
  } catch (error) {
    return { refused: "credential", error };
  }
}

/** The longest prompt any kind accepts: part of every body budget that carries one. */
export const longestPromptBytes = (limits: Pick<ValidationLimits, "maxPromptBytes">): number =>
  Math.max(limits.maxPromptBytes.image, limits.maxPromptBytes.video, limits.maxPromptBytes.text);

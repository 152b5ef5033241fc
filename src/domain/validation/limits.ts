/** Limits of the spec, section 8, that validation enforces. */
export interface ValidationLimits {
  /** Input images per request on the active route (100 or 30 in the spec). */
  readonly maxInputImages: number;
  /** Combined decoded size of inline input images. */
  readonly maxInputBytes: number;
  /** UTF-8 bytes of a prompt, by the model's kind (MAX_PROMPT_BYTES_IMAGE, _VIDEO, _TEXT). */
  readonly maxPromptBytes: { readonly image: number; readonly video: number; readonly text: number };
  /** `metadata`: top-level keys, bytes of one key, bytes of one value (as JSON), bytes of the whole object (as JSON). */
  readonly metadata: { readonly maxKeys: number; readonly maxKeyBytes: number; readonly maxValueBytes: number; readonly maxTotalBytes: number };
}

export const MIB = 1024 * 1024;

export const KIB = 1024;

export const DEFAULT_LIMITS: ValidationLimits = {
  maxInputImages: 100,
  maxInputBytes: 200 * MIB,
  maxPromptBytes: { image: 32 * KIB, video: 16 * KIB, text: 1 * MIB },
  metadata: { maxKeys: 64, maxKeyBytes: 256, maxValueBytes: 4 * KIB, maxTotalBytes: 16 * KIB },
};

export const TIMEOUT_RANGE = { min: 30, max: 1200 } as const;
/** A job's budget when the request sets none. */
export const DEFAULT_TIMEOUT_SECONDS = 1200;
export const VIDEO_JOB_DURATION_RANGE = { min: 4, max: 8 } as const;
export const VIDEO_INTERACTION_DURATION_RANGE = { min: 1, max: 8, default: 4 } as const;
/** 1080p and 4k video are only made in 8-second clips. */
export const HIGH_RES_VIDEO_DURATION = 8;

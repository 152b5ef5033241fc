import { create } from "@bufbuild/protobuf";
import { CreateGenerationRequestSchema, ListModelsResponseSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import { JobResultSchema, JobSchema, JobStatus, JobUsageSchema } from "../../../../gen/generation/v1/job_pb.js";
import { ModelKindSchema } from "../../../../gen/generation/v1/model_pb.js";
import { BALANCE, IDEMPOTENCY_HEADERS, MONEY, PLATFORM_ERROR, PLATFORM_SECURITY, operation } from "./common.js";
import { describedFields, orNull, protoJsonSchema } from "./proto-json-schema.js";
import { restView } from "./rest-view.js";

/**
 * Schemas of the jobs API under /api/v1 (spec 2 and 4). Request bodies are
 * checked for their fields' types here; the domain's rules (which models,
 * ratios, limits) stay in the core, which answers them in the same shape.
 * Field names are the proto's (snake_case); the lowerCamelCase forms are
 * accepted too, as the proto JSON mapping reads them.
 */

function nullableFields<T extends Record<string, Record<string, unknown>>>(properties: T): T {
  return Object.fromEntries(Object.entries(properties).map(([name, schema]) => [name, orNull(schema)])) as T;
}

/** An int32 of the proto JSON mapping: a number or a string the mapping reads as one (it alone decides which, for both spellings of the name). */
const INT32 = { type: ["integer", "string"] } as const;

const CREATE_GENERATION_BODY = {
  type: "object",
  // As the proto JSON mapping reads the body, null is "not set" for every field.
  properties: describedFields(CreateGenerationRequestSchema, nullableFields({
    model: { type: "string", description: 'Model id, e.g. "aimodel-3-pro-image" (a "-preview" suffix is accepted for image models). See GET /api/v1/models.' },
    prompt: { type: "string" },
    aspect_ratio: { type: "string" },
    resolution: { type: "string" },
    input_images_urls: { type: "array", items: { type: "string" } },
    input_images_base64: { type: "array", items: { type: "string" } },
    callback_url: { type: "string" },
    metadata: { type: "object", additionalProperties: true },
    timeout: INT32,
    duration_seconds: INT32,
  })),
  examples: [
    { model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", aspect_ratio: "16:9", resolution: "2K" },
    { model: "aimodel-3.5-flash", prompt: "Write a haiku about tides" },
    { model: "videomodel-3.1-generate-001", prompt: "waves at sunrise", resolution: "720p", duration_seconds: 4 },
  ],
} as const;

/** The same body with the model fixed by the route (deprecated aliases). */
const { model: _model, ...ALIAS_PROPERTIES } = CREATE_GENERATION_BODY.properties;
const ALIAS_BODY = { type: "object", properties: ALIAS_PROPERTIES, examples: [{ prompt: "a lighthouse at dusk", aspect_ratio: "16:9" }] } as const;

export const JOB_STATUS = { type: "string", enum: ["queued", "processing", "done", "failed", "canceled"] } as const;

/** The accepted answer (202), shared with the video interactions route. */
export const ACCEPTED = {
  type: "object",
  description: "The job was stored and will run. Poll `status_url` (also in Location) with the same key.",
  properties: {
    job_id: { type: "string", format: "uuid" },
    status: JOB_STATUS,
    status_url: { type: "string", description: "/api/v1/jobs/{job_id}" },
  },
  required: ["job_id", "status", "status_url"],
  headers: {
    // "x-required": the header is in every such answer (openapi.ts turns it into the header's `required`).
    location: { type: "string", description: "The status URL.", "x-required": true },
    "idempotent-replayed": { type: "string", enum: ["true"], description: "Present when this answer replays an earlier request with the same Idempotency-Key." },
  },
  examples: [{ job_id: "3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41", status: "queued", status_url: "/api/v1/jobs/3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41" }],
} as const;



const JOB_RESULT = restView(JobResultSchema);
const JOB_USAGE = restView(JobUsageSchema, { reserved: { schema: MONEY }, charged: { schema: MONEY } });
const NO_USAGE = create(JobUsageSchema, { reserved: "0.00", charged: "0.00" });
const NULLABLE_TIME = { schema: orNull({ type: "string" }) };

/** The job as GET /api/v1/jobs/{id} answers it (spec 2.4; also each item of GET /api/v1/jobs). */
export const JOB_VIEW = restView(JobSchema, {
  created_at: NULLABLE_TIME,
  started_at: NULLABLE_TIME,
  finished_at: NULLABLE_TIME,
  result: {
    schema: { ...JOB_RESULT.schema, type: ["object", "null"] },
    json: (job) => (job.status === JobStatus.DONE ? JOB_RESULT.json(job.result ?? create(JobResultSchema)) : null),
  },
  error: {
    json: (job) => (job.status === JobStatus.FAILED ? (job.error ?? "generation_failed") : (job.error || null)),
  },
  error_message: { json: (job) => (job.status === JobStatus.FAILED ? (job.errorMessage ?? null) : (job.errorMessage || null)) },
  usage: { schema: JOB_USAGE.schema, json: (job) => JOB_USAGE.json(job.usage ?? NO_USAGE) },
  metadata: false,
}, {
  examples: [
    {
      job_id: "3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41",
      status: "done",
      model: "aimodel-3-pro-image",
      created_at: "2026-11-23T10:00:00.000Z",
      started_at: "2026-11-23T10:00:00.120Z",
      finished_at: "2026-11-23T10:00:02.480Z",
      result: { image_url: "http://127.0.0.1:8080/files/3f1c2a9e.png?expires=1795000000&signature=ab12", text: null, mime_type: "image/png" },
      error: null,
      error_message: null,
      usage: { prompt_token_count: 0, candidates_token_count: 0, total_token_count: 0, reserved: "0.134", charged: "0.134" },
    },
  ],
});
const JOB = JOB_VIEW.schema as typeof JOB_VIEW.schema & { examples: unknown[] };

/** GET /api/v1/models: ListModelsResponse in proto field names, the kind as a lower-case word. */
const MODELS = (() => {
  const schema = protoJsonSchema(ListModelsResponseSchema, { direction: "output", names: "proto" }) as {
    properties: { models: { items: { properties: Record<string, unknown> } } };
  };
  const kinds = ModelKindSchema.values.map((value) => value.name.replace(/^MODEL_KIND_/, "").toLowerCase());
  schema.properties.models.items.properties.kind = { type: "string", enum: kinds };
  return { ...schema, required: ["models", "aspect_ratios"] };
})();

const JOB_ID_PARAMS = { type: "object", properties: { jobId: { type: "string" } }, required: ["jobId"] } as const;

/** Prefer: wait=N (RFC 7240), on every route that creates a job from /api/v1. */
const CREATION_HEADERS = {
  ...IDEMPOTENCY_HEADERS,
  properties: {
    ...IDEMPOTENCY_HEADERS.properties,
    prefer: {
      type: "string",
      description:
        "`wait=N` (0 to 60 seconds): answer 200 with the finished job if it finishes within N seconds, otherwise 202 as usual. " +
        "A wait that is not a whole number of seconds up to 60 is 400 invalid_wait; other preferences are ignored.",
      examples: ["wait=30"],
    },
  },
} as const;

/** The job finished within the creation's Prefer: wait (its JSON as GET /api/v1/jobs/{id}). */
const FINISHED_WITHIN_WAIT = {
  ...JOB,
  description: "The job finished within `Prefer: wait`: the job as GET /api/v1/jobs/{job_id} answers it.",
  headers: {
    "preference-applied": { type: "string", description: "`wait=N`: the wait that was honoured.", "x-required": true },
    location: { type: "string", description: "/api/v1/jobs/{job_id}", "x-required": true },
  },
} as const;

export const CREATE_GENERATION_SCHEMA = operation(
  "jobs", "createGeneration", "Create a job (image, text or video; the model decides)", PLATFORM_SECURITY, {
  description:
    "Money for the job is reserved before the answer; it is settled on success and released on failure. " +
    "With `Prefer: wait=N` the answer waits up to N seconds for the job to finish (200 with the job), otherwise 202.",
  headers: CREATION_HEADERS,
  body: CREATE_GENERATION_BODY,
  response: { 200: FINISHED_WITHIN_WAIT, 202: ACCEPTED },
});

/** The accepted answer of a deprecated alias: it names its successor (routes/jobs-routes.ts sets both headers). */
const DEPRECATED_ACCEPTED = {
  ...ACCEPTED,
  headers: {
    ...ACCEPTED.headers,
    deprecation: { type: "string", enum: ["true"], description: "This route is deprecated.", "x-required": true },
    link: { type: "string", description: 'The successor: `</api/v1/generations>; rel="successor-version"`.', "x-required": true },
  },
} as const;

export const aliasSchema = (kind: "text" | "url", model: string) =>
  operation(
    "deprecated aliases", `${kind}Generations_${model.replace(/[^a-z0-9]/gi, "_")}`,
    `Deprecated: create a ${model} job (${kind === "text" ? "text-to-image" : "image-to-image from URLs"})`, PLATFORM_SECURITY,
    { deprecated: true, headers: CREATION_HEADERS, body: ALIAS_BODY, response: { 200: FINISHED_WITHIN_WAIT, 202: DEPRECATED_ACCEPTED } },
  );

export const GET_JOB_SCHEMA = operation("jobs", "getJob", "Read a job", PLATFORM_SECURITY, {
  params: JOB_ID_PARAMS,
  response: { 200: JOB },
});

export const CANCEL_JOB_SCHEMA = operation("jobs", "cancelJob", "Cancel a job", PLATFORM_SECURITY, {
  description:
    "A queued job is canceled at once and its whole reservation released. A processing job is aborted upstream: an image or video job " +
    "is charged nothing, a text job what the upstream reported as produced before the abort (shown in its usage). Idempotent: a canceled " +
    "job answers 200 again. A job that finished first (done or failed) is 409 job_already_finished, with the job in `job`. " +
    "The webhook of a canceled job has `\"status\": \"canceled\"`. No body is needed (an empty JSON object is accepted).",
  params: JOB_ID_PARAMS,
  body: { type: "object", additionalProperties: false, description: "Nothing: leave the body out, or send {}.", examples: [{}] },
  response: {
    200: { ...JOB, description: "The job, canceled, with its final charge." },
    409: {
      ...PLATFORM_ERROR,
      description: "job_already_finished: the job ended (done or failed) before the cancel; `job` is the job as it stands.",
      properties: { ...PLATFORM_ERROR.properties, job: JOB },
      examples: [{ error: { code: "job_already_finished", message: "job 3f1c2a9e-0b7d-4c55-9a51-2f0f3e7c6d41 already finished: it is done" }, job: JOB.examples[0] }],
    },
  },
});

export const WATCH_JOB_SCHEMA = operation("jobs", "watchJob", "Follow a job's state as Server-Sent Events", PLATFORM_SECURITY, {
  description:
    "One `event: job` per state change, its `data:` the job's JSON (as GET /api/v1/jobs/{job_id}) and its `id:` the state's place " +
    "(1 queued, 2 processing, 3 finished). The first event is the job's current state; the stream ends after the terminal state. " +
    "Comment lines (`: keep-alive`) are sent while nothing changes. Send `Last-Event-ID` to resume: states already seen are not sent again.",
  params: JOB_ID_PARAMS,
  headers: {
    type: "object",
    properties: { "last-event-id": { type: "string", description: "The `id:` of the last event received; an id this service never sent counts as none." } },
  },
  response: {
    200: {
      description: "The event stream.",
      content: {
        "text/event-stream": {
          // One event (OpenAPI 3.1 has no itemSchema: the schema describes each event of the stream, as Schemathesis reads it).
          schema: {
            type: "object",
            description: "One event: `event: job`, `id: <1|2|3>`, `data: <the job's JSON>`; comment lines (`: keep-alive`) between events.",
            properties: {
              event: { type: "string", enum: ["job"] },
              id: { type: "string", enum: ["1", "2", "3"], description: "1 queued, 2 processing, 3 finished." },
              data: { type: "string", contentMediaType: "application/json", contentSchema: JOB },
            },
            required: ["event", "id", "data"],
          },
        },
      },
    },
  },
});

/**
 * GET /api/v1/jobs. The query's parameters are typed as text only: every rule
 * on their values (the statuses, known models, 1 to 100, the page token) is
 * the domain's (src/domain/jobs/job-list.ts), answered 400 with its own code,
 * so a schema never refuses a value first (with 422) under another name.
 */
const LIST_JOBS_QUERY = {
  type: "object",
  properties: {
    status: { type: "string", description: "Only jobs in this state: queued, processing, done, failed or canceled (otherwise 400 invalid_status).", examples: ["done"] },
    model: { type: "string", description: "Only jobs of this model, as GET /api/v1/models names it (otherwise 400 invalid_model).", examples: ["aimodel-3-pro-image"] },
    created_after: { type: "string", format: "date-time", description: "Only jobs created strictly after this RFC 3339 instant (otherwise 400 invalid_timestamp)." },
    created_before: {
      type: "string",
      format: "date-time",
      description: "Only jobs created strictly before this RFC 3339 instant; not before created_after (400 invalid_time_range). No limit on the span.",
    },
    limit: { type: "string", description: "Page size, an integer from 1 to 100; 20 when absent (otherwise 400 invalid_limit).", examples: ["20"] },
    page_token: {
      type: "string",
      description: "next_page_token of the previous page, with the same filters (otherwise 400 invalid_page_token).",
    },
  },
} as const;

const JOB_PAGE = {
  type: "object",
  description: "The caller's jobs, newest first. A page may hold fewer than `limit` jobs while more follow: only `next_page_token: null` ends the listing.",
  properties: {
    jobs: { type: "array", items: JOB },
    next_page_token: { ...orNull({ type: "string" }), description: "Pass as page_token for the next page; null on the last page." },
  },
  required: ["jobs", "next_page_token"],
  examples: [{ jobs: JOB.examples, next_page_token: null }],
} as const;

export const LIST_JOBS_SCHEMA = operation("jobs", "listJobs", "List the key's account's jobs, newest first", PLATFORM_SECURITY, {
  description:
    "Cursor pagination: stable while jobs are being created (a page continues strictly below the previous page's last job). " +
    "Only the caller's account is listed. Bad parameters are 400 (invalid_status, invalid_model, invalid_timestamp, invalid_time_range, " +
    "invalid_limit, invalid_page_token, invalid_query) and change nothing.",
  querystring: LIST_JOBS_QUERY,
  response: { 200: JOB_PAGE },
});

export const GET_BALANCE_SCHEMA = operation("jobs", "getBalance", "The key's account balance", PLATFORM_SECURITY, {
  response: { 200: BALANCE },
});

export const LIST_MODELS_SCHEMA = operation("jobs", "listModels", "Every model with its options and prices (no key needed)", [], {
  response: { 200: MODELS },
});

import { toJson, type MessageInitShape } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  CreateGenerationRequestSchema, InputMode, ListModelsResponseSchema, type CreateGenerationResponse, type ListJobsRequestSchema,
} from "../../../../gen/generation/v1/generation_service_pb.js";
import { JobStatusSchema, type JobStatus } from "../../../../gen/generation/v1/job_pb.js";
import { checkStatus, type CoreClients } from "../../../core/index.js";
import { GatewayError } from "../gateway-error.js";
import { limitOf, queryRule, queryText, timestampOf, type QueryText } from "../query-params.js";
import { idempotencyKeyOf, platformCall, withDelivery } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { SseAnswer } from "../sse.js";
import { balanceJson, parseBody, type BodyRules } from "../json-mapping.js";
import type { WatchJobResponse } from "../../../../gen/generation/v1/generation_service_pb.js";
import { httpErrorOf } from "../error-replies.js";
import {
  aliasSchema, CANCEL_JOB_SCHEMA, WATCH_JOB_SCHEMA, CREATE_GENERATION_SCHEMA, GET_BALANCE_SCHEMA, GET_JOB_SCHEMA, JOB_VIEW, LIST_JOBS_SCHEMA,
  LIST_MODELS_SCHEMA,
} from "../schemas/jobs.js";
import { enumWords } from "../schemas/rest-view.js";
import { discardStaged, stagedImagesOf, streamInlineImages, type StreamedImagesOptions } from "../streamed-images.js";

const STATUS_WORDS = enumWords(JobStatusSchema);

/** Deprecated aliases (spec section 9): each maps to a fixed model. */
const ALIASES = [
  { prefix: "/nb", model: "aimodel-2.5-flash-image" },
  { prefix: "/nb2", model: "aimodel-3.1-flash-image" },
  { prefix: "", model: "aimodel-3-pro-image" },
] as const;

export function acceptedReply(reply: FastifyReply, response: Pick<CreateGenerationResponse, "jobId" | "status" | "statusUrl" | "replayed" | "job">) {
  if (response.replayed) reply.header("idempotent-replayed", "true");
  reply.header("location", response.statusUrl);
  // Finished within Prefer: wait: the job itself.
  if (response.job) return reply.code(200).send(JOB_VIEW.json(response.job));
  return reply.code(202).send({ job_id: response.jobId, status: STATUS_WORDS.get(response.status), status_url: response.statusUrl });
}

/**
 * `Prefer: wait=N` (RFC 7240): the seconds to wait, any other preference
 * ignored. Only the syntax is read here (a whole number); its bound is the
 * core's rule. The answer says which wait it honoured (Preference-Applied).
 */
function preferredWait(request: FastifyRequest, reply: FastifyReply): number | undefined {
  const header = request.headers.prefer;
  if (header === undefined) return undefined;
  const preferences = (Array.isArray(header) ? header.join(",") : header).split(",");
  for (const preference of preferences) {
    const [name, ...rest] = preference.split(";")[0]!.split("=");
    if (name!.trim().toLowerCase() !== "wait") continue;
    const value = rest.join("=").trim().replace(/^"(.*)"$/, "$1");
    if (!/^[0-9]{1,9}$/.test(value)) {
      throw new GatewayError(400, "invalid_wait", `Prefer: wait must be a whole number of seconds from 0 to 60 (got "${value.slice(0, 20)}")`);
    }
    reply.header("preference-applied", `wait=${Number(value)}`);
    return Number(value);
  }
  return undefined;
}

export interface JobsRoutesOptions {
  /** Domain rules applied to the raw JSON before it is converted (metadata). */
  readonly rules: BodyRules;
  /** How large bodies' inline images are streamed to the core's staging. */
  readonly images: StreamedImagesOptions;
  /** How often an idle job event stream sends a keep-alive comment. */
  readonly sseKeepAliveMs: number;
}

/**
 * A job's events as Server-Sent Events. Errors before the first event (401,
 * 404) are ordinary HTTP errors; after it, the stream just ends (the client
 * resumes with Last-Event-ID). A client that hangs up ends the watch through
 * the call's signal. Comments keep the connection (and proxies) from timing
 * out while the job is unchanged.
 */
async function streamEvents(events: AsyncIterable<WatchJobResponse>, reply: FastifyReply, keepAliveMs: number) {
  const stream = events[Symbol.asyncIterator]();
  const first = await stream.next();
  const sse = new SseAnswer(reply, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", connection: "keep-alive" });
  const keepAlive = setInterval(() => sse.comment("keep-alive"), keepAliveMs);
  try {
    for (let next = first; !next.done && sse.open; next = await stream.next()) {
      await sse.write(`event: job\nid: ${next.value.eventId}\ndata: ${JSON.stringify(JOB_VIEW.json(next.value.job!))}\n\n`);
    }
  } catch (error) {
    reply.request.log.debug({ err: error }, "job event stream ended early");
  } finally {
    clearInterval(keepAlive);
    await stream.return?.(undefined);
    sse.end();
  }
}

export function jobsRoutes(core: CoreClients, guard: BodyGuard, options: JobsRoutesOptions) {
  return async (app: FastifyInstance) => {
    streamInlineImages(app, options.images);
    // The key is checked, and the announced size, before the body (with its inline images) is read.
    const generation = guard({ credential: "api_key", keyFrom: "platform", images: true });
    const keyed = guard({ credential: "api_key", keyFrom: "platform", images: false });
    const createGeneration = (fixed?: { model: string; inputMode: InputMode }) =>
      async (request: FastifyRequest, reply: FastifyReply) => {
        try {
          const message = parseBody(CreateGenerationRequestSchema, request.body, options.rules);
          message.idempotencyKey = idempotencyKeyOf(request);
          message.waitSeconds = preferredWait(request, reply);
          message.inputMode = fixed?.inputMode ?? InputMode.UNSPECIFIED;
          if (fixed) message.model = fixed.model;
          const call = platformCall(request, reply, withDelivery(reply, stagedImagesOf(request)));
          return acceptedReply(reply, await core.generation.createGeneration(message, call));
        } finally {
          await discardStaged(request);
        }
      };

    app.post("/api/v1/generations", { ...generation, schema: CREATE_GENERATION_SCHEMA }, createGeneration());
    for (const { prefix, model } of ALIASES) {
      for (const [kind, inputMode] of [["text", InputMode.TEXT_ONLY], ["url", InputMode.IMAGE_URLS]] as const) {
        const options = { ...generation, onSend: deprecationHeaders, schema: aliasSchema(kind, model) };
        app.post(`/api/v1${prefix}/${kind}-generations`, options, createGeneration({ model, inputMode }));
      }
    }

    app.get<{ Params: { jobId: string } }>("/api/v1/jobs/:jobId", { schema: GET_JOB_SCHEMA }, async (request, reply) => {
      const { job } = await core.generation.getJob({ jobId: request.params.jobId }, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return JOB_VIEW.json(job!);
    });

    app.post<{ Params: { jobId: string } }>(
      "/api/v1/jobs/:jobId/cancel",
      {
        ...keyed,
        schema: CANCEL_JOB_SCHEMA,
        // No body is the usual cancel: it reads as {} (anything else is judged by the schema).
        preValidation: async (request: FastifyRequest) => {
          request.body ??= {};
        },
      },
      async (request, reply) => {
        const call = platformCall(request, reply);
        try {
          const { job } = await core.generation.cancelJob({ jobId: request.params.jobId }, call);
          reply.header("cache-control", "no-store");
          return JOB_VIEW.json(job!);
        } catch (error) {
          const refusal = httpErrorOf(error);
          if (refusal.reason !== "job_already_finished") throw error;
          // 409 with the job as it stands: what it finished as, and what it was charged.
          const { job } = await core.generation.getJob({ jobId: request.params.jobId }, platformCall(request, reply));
          return reply.code(refusal.status).send({ error: { code: refusal.reason, message: refusal.message }, job: JOB_VIEW.json(job!) });
        }
      },
    );

    app.get<{ Params: { jobId: string } }>("/api/v1/jobs/:jobId/events", { schema: WATCH_JOB_SCHEMA }, async (request, reply) => {
      const lastEventId = request.headers["last-event-id"];
      const events = core.generation.watchJob(
        { jobId: request.params.jobId, lastEventId: typeof lastEventId === "string" ? lastEventId : "" },
        platformCall(request, reply),
      );
      await streamEvents(events, reply, options.sseKeepAliveMs);
    });

    // attachValidation: the query schema types text only, so its one refusal (a repeated parameter) is ours to answer, as 400.
    // The key is judged before the query (the guard's header check: 401 first, like every other route).
    app.get("/api/v1/jobs", { onRequest: keyed.onRequest, schema: LIST_JOBS_SCHEMA, attachValidation: true }, async (request, reply) => {
      const message = listJobsRequest(queryText(request));
      const response = await core.generation.listJobs(message, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return { jobs: response.jobs.map(JOB_VIEW.json), next_page_token: response.nextPageToken === "" ? null : response.nextPageToken };
    });

    app.get("/api/v1/balance", { schema: GET_BALANCE_SCHEMA }, async (request, reply) => {
      const { balance } = await core.generation.getBalance({}, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return balanceJson(balance);
    });

    app.get("/api/v1/models", { schema: LIST_MODELS_SCHEMA }, async (request, reply) => {
      const response = await core.generation.listModels({}, platformCall(request, reply));
      const json = toJson(ListModelsResponseSchema, response, { useProtoFieldName: true, alwaysEmitImplicit: true }) as {
        models: { kind: string }[];
      };
      for (const model of json.models) model.kind = model.kind.replace(/^MODEL_KIND_/, "").toLowerCase();
      return json;
    });
  };
}

/** "done" → JOB_STATUS_DONE. */
const STATUS_BY_NAME = new Map([...STATUS_WORDS].map(([number, word]) => [word, number as JobStatus]));

/** The query of GET /api/v1/jobs as a ListJobsRequest; the text's own syntax is checked here, its values by the domain. */
function listJobsRequest(query: QueryText): MessageInitShape<typeof ListJobsRequestSchema> {
  const status = query.status === undefined || query.status === "" ? undefined : queryRule(() => checkStatus(query.status));
  // Digits only ("1e2", " 5" and "5.0" are not integers of the query); the bounds are the domain's.
  const limit = limitOf(query.limit);
  return {
    status: status === undefined ? undefined : STATUS_BY_NAME.get(status),
    model: query.model ?? "",
    createdAfter: timestampOf("created_after", query.created_after),
    createdBefore: timestampOf("created_before", query.created_before),
    limit,
    pageToken: query.page_token ?? "",
  };
}

async function deprecationHeaders(_request: unknown, reply: FastifyReply, payload: unknown) {
  reply.header("deprecation", "true");
  reply.header("link", '</api/v1/generations>; rel="successor-version"');
  return payload;
}

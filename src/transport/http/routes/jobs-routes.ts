import { fromJson, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  CreateGenerationRequestSchema, InputMode, ListModelsResponseSchema, type CreateGenerationResponse, type ListJobsRequestSchema,
} from "../../../../gen/generation/v1/generation_service_pb.js";
import { JobStatusSchema, type JobStatus } from "../../../../gen/generation/v1/job_pb.js";
import { DomainError } from "../../../domain/errors/domain-error.js";
import { checkLimit, checkStatus } from "../../../domain/jobs/job-list.js";
import { GatewayError } from "../gateway-error.js";
import type { CoreClients } from "../../../runtime/core-clients.js";
import { idempotencyKeyOf, platformCall } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { balanceJson, jobJson, jobStatusName, parseBody, type BodyRules } from "../json-mapping.js";
import {
  aliasSchema, CREATE_GENERATION_SCHEMA, GET_BALANCE_SCHEMA, GET_JOB_SCHEMA, LIST_JOBS_SCHEMA, LIST_MODELS_SCHEMA,
} from "../schemas/jobs.js";
import { discardStaged, stagedImagesOf, streamInlineImages, type StreamedImagesOptions } from "../streamed-images.js";

/** Deprecated aliases (spec section 9): each maps to a fixed model. */
const ALIASES = [
  { prefix: "/nb", model: "aimodel-2.5-flash-image" },
  { prefix: "/nb2", model: "aimodel-3.1-flash-image" },
  { prefix: "", model: "aimodel-3-pro-image" },
] as const;

export function acceptedReply(reply: FastifyReply, response: Pick<CreateGenerationResponse, "jobId" | "status" | "statusUrl" | "replayed">) {
  if (response.replayed) reply.header("idempotent-replayed", "true");
  reply.header("location", response.statusUrl);
  return reply.code(202).send({ job_id: response.jobId, status: jobStatusName(response.status), status_url: response.statusUrl });
}

export interface JobsRoutesOptions {
  /** Domain rules applied to the raw JSON before it is converted (metadata). */
  readonly rules: BodyRules;
  /** How large bodies' inline images are streamed to the core's staging. */
  readonly images: StreamedImagesOptions;
}

export function jobsRoutes(core: CoreClients, guard: BodyGuard, options: JobsRoutesOptions) {
  return async (app: FastifyInstance) => {
    streamInlineImages(app, options.images);
    // The key is checked, and the announced size, before the body (with its inline images) is read.
    const generation = guard({ credential: "api_key", keyFrom: "platform", images: true });
    const createGeneration = (fixed?: { model: string; inputMode: InputMode }) =>
      async (request: FastifyRequest, reply: FastifyReply) => {
        try {
          const message = parseBody(CreateGenerationRequestSchema, request.body, options.rules);
          message.idempotencyKey = idempotencyKeyOf(request);
          message.inputMode = fixed?.inputMode ?? InputMode.UNSPECIFIED;
          if (fixed) message.model = fixed.model;
          const call = { ...platformCall(request, reply), contextValues: stagedImagesOf(request) };
          return acceptedReply(reply, await core.generation.createGeneration(message, call));
        } finally {
          await discardStaged(request);
        }
      };

    app.post("/api/v1/generations", { ...generation, schema: CREATE_GENERATION_SCHEMA }, createGeneration());
    for (const alias of ALIASES) {
      const deprecated = { ...generation, onSend: deprecationHeaders };
      app.post(
        `/api/v1${alias.prefix}/text-generations`,
        { ...deprecated, schema: aliasSchema("text", alias.model) },
        createGeneration({ model: alias.model, inputMode: InputMode.TEXT_ONLY }),
      );
      app.post(
        `/api/v1${alias.prefix}/url-generations`,
        { ...deprecated, schema: aliasSchema("url", alias.model) },
        createGeneration({ model: alias.model, inputMode: InputMode.IMAGE_URLS }),
      );
    }

    app.get<{ Params: { jobId: string } }>("/api/v1/jobs/:jobId", { schema: GET_JOB_SCHEMA }, async (request, reply) => {
      const { job } = await core.generation.getJob({ jobId: request.params.jobId }, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return jobJson(job!);
    });

    // attachValidation: the query schema types text only, so its one refusal (a repeated parameter) is ours to answer, as 400.
    app.get<{ Querystring: ListJobsQuery }>("/api/v1/jobs", { schema: LIST_JOBS_SCHEMA, attachValidation: true }, async (request, reply) => {
      let message: ReturnType<typeof listJobsRequest>;
      try {
        if (request.validationError) throw new GatewayError(400, "invalid_query", request.validationError.message);
        message = listJobsRequest(request.query);
      } catch (error) {
        // The key is judged before the query, as the core does for ListJobs: a query the proto cannot carry is refused only
        // after a call that authenticates and changes nothing (401 first, like every other route).
        await core.generation.getBalance({}, platformCall(request, reply));
        throw error;
      }
      const response = await core.generation.listJobs(message, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return { jobs: response.jobs.map(jobJson), next_page_token: response.nextPageToken === "" ? null : response.nextPageToken };
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

interface ListJobsQuery {
  status?: string;
  model?: string;
  created_after?: string;
  created_before?: string;
  limit?: string;
  page_token?: string;
}

/** A domain rule applied to the raw query text, refused in the gateway's terms (400 and the domain's reason); the core applies it again. */
function queryRule<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof DomainError) throw new GatewayError(400, error.reason, error.message);
    throw error;
  }
}

/** "done" → JOB_STATUS_DONE: the proto's enum names, lower-cased and without the prefix. */
const STATUS_BY_NAME = new Map(JobStatusSchema.values.map((value) => [value.name.replace(/^JOB_STATUS_/, "").toLowerCase(), value.number as JobStatus]));

/** An RFC 3339 instant, as the proto JSON mapping reads a Timestamp. */
function timestampOf(field: string, text: string | undefined): Timestamp | undefined {
  if (text === undefined) return undefined;
  try {
    return fromJson(TimestampSchema, text);
  } catch {
    throw new GatewayError(400, "invalid_timestamp", `${field} must be an RFC 3339 time such as 2026-11-23T10:00:00Z (got "${text}")`);
  }
}

/** The query of GET /api/v1/jobs as a ListJobsRequest; the text's own syntax is checked here, its values by the domain. */
function listJobsRequest(query: ListJobsQuery): MessageInitShape<typeof ListJobsRequestSchema> {
  const status = query.status === undefined || query.status === "" ? undefined : queryRule(() => checkStatus(query.status));
  // Digits only ("1e2", " 5" and "5.0" are not integers of the query); the bounds are the domain's.
  const limit = query.limit === undefined ? undefined : queryRule(() => checkLimit(/^[0-9]{1,4}$/.test(query.limit!) ? Number(query.limit) : Number.NaN, `"${query.limit}"`));
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

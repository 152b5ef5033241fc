import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  CreateGenerationRequestSchema, InputMode, ListModelsResponseSchema, type CreateGenerationResponse,
} from "../../../../gen/generation/v1/generation_service_pb.js";
import type { CoreClients } from "../../../runtime/core-clients.js";
import { idempotencyKeyOf, platformCall } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { balanceJson, jobJson, jobStatusName, parseBody, type BodyRules } from "../json-mapping.js";
import { aliasSchema, CREATE_GENERATION_SCHEMA, GET_BALANCE_SCHEMA, GET_JOB_SCHEMA, LIST_MODELS_SCHEMA } from "../schemas/jobs.js";
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

async function deprecationHeaders(_request: unknown, reply: FastifyReply, payload: unknown) {
  reply.header("deprecation", "true");
  reply.header("link", '</api/v1/generations>; rel="successor-version"');
  return payload;
}

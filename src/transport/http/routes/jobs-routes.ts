import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply } from "fastify";
import {
  CreateGenerationRequestSchema, InputMode, ListModelsResponseSchema, type CreateGenerationResponse,
} from "../../../../gen/generation/v1/generation_service_pb.js";
import type { CoreClients } from "../../../runtime/core-clients.js";
import { idempotencyKeyOf, platformCall } from "../call-options.js";
import { balanceJson, jobJson, jobStatusName, parseBody } from "../json-mapping.js";

/** Deprecated aliases (spec section 9): each maps to a fixed model. */
const ALIASES = [
  { prefix: "/nb", model: "aimodel-2.5-flash-image" },
  { prefix: "/nb2", model: "aimodel-3.1-flash-image" },
  { prefix: "", model: "aimodel-3-pro-image" },
] as const;

export const MAX_GENERATION_BODY_BYTES = 320 * 1024 * 1024;

export function acceptedReply(reply: FastifyReply, response: Pick<CreateGenerationResponse, "jobId" | "status" | "statusUrl" | "replayed">) {
  if (response.replayed) reply.header("idempotent-replayed", "true");
  reply.header("location", response.statusUrl);
  return reply.code(202).send({ job_id: response.jobId, status: jobStatusName(response.status), status_url: response.statusUrl });
}

export function jobsRoutes(core: CoreClients) {
  return async (app: FastifyInstance) => {
    const createGeneration = (fixed?: { model: string; inputMode: InputMode }) =>
      async (request: { body: unknown; headers: Record<string, unknown> }, reply: FastifyReply) => {
        const message = parseBody(CreateGenerationRequestSchema, request.body);
        message.idempotencyKey = idempotencyKeyOf(request as never);
        message.inputMode = fixed?.inputMode ?? InputMode.UNSPECIFIED;
        if (fixed) message.model = fixed.model;
        const response = await core.generation.createGeneration(message, platformCall(request as never, reply));
        return acceptedReply(reply, response);
      };

    app.post("/api/v1/generations", { bodyLimit: MAX_GENERATION_BODY_BYTES }, createGeneration());
    for (const alias of ALIASES) {
      const deprecated = { bodyLimit: MAX_GENERATION_BODY_BYTES, onSend: deprecationHeaders };
      app.post(`/api/v1${alias.prefix}/text-generations`, deprecated, createGeneration({ model: alias.model, inputMode: InputMode.TEXT_ONLY }));
      app.post(`/api/v1${alias.prefix}/url-generations`, deprecated, createGeneration({ model: alias.model, inputMode: InputMode.IMAGE_URLS }));
    }

    app.get<{ Params: { jobId: string } }>("/api/v1/jobs/:jobId", async (request, reply) => {
      const { job } = await core.generation.getJob({ jobId: request.params.jobId }, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return jobJson(job!);
    });

    app.get("/api/v1/balance", async (request, reply) => {
      const { balance } = await core.generation.getBalance({}, platformCall(request, reply));
      reply.header("cache-control", "no-store");
      return balanceJson(balance);
    });

    app.get("/api/v1/models", async (request, reply) => {
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

import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { UpstreamRouteSchema } from "../../../../../gen/generation/v1/admin_service_pb.js";
import type { CoreClients } from "../../../../core/index.js";
import type { BodyGuard } from "../../edge/body-guard.js";
import { ADMIN_SCHEMAS as S } from "../../schemas/admin.js";
import { ADMIN_BODY, adminCall, booleanField } from "./admin-call.js";

/** What the operator pauses: the whole project, a model, an upstream route (listed with its health). */
export function operationRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const withBody = guard(ADMIN_BODY);
    app.put("/admin/v1/pause", { ...withBody, schema: S.setProjectPaused }, async (request) => {
      const response = await core.admin.setProjectPaused({ paused: booleanField(request.body, "paused") }, adminCall(request));
      return { paused: response.paused };
    });

    app.put<{ Params: { model: string } }>("/admin/v1/models/:model/pause", { ...withBody, schema: S.setModelPaused }, async (request) => {
      const response = await core.admin.setModelPaused(
        { model: request.params.model, paused: booleanField(request.body, "paused") },
        adminCall(request),
      );
      return { model: response.model, paused: response.paused };
    });

    app.get("/admin/v1/routes", { schema: S.listRoutes }, async (request) => {
      const { routes } = await core.admin.listRoutes({}, adminCall(request));
      // Counters are int64 in the proto (strings in proto JSON); the REST view gives plain numbers.
      return {
        routes: routes.map((route) => ({
          ...(toJson(UpstreamRouteSchema, route, { useProtoFieldName: true, alwaysEmitImplicit: true }) as object),
          requests: Number(route.requests),
          failures: Number(route.failures),
        })),
      };
    });

    app.put<{ Params: { name: string } }>("/admin/v1/routes/:name/pause", { ...withBody, schema: S.setRoutePaused }, async (request) => {
      const response = await core.admin.setRoutePaused(
        { name: request.params.name, paused: booleanField(request.body, "paused") },
        adminCall(request),
      );
      return { name: response.name, paused: response.paused };
    });
  };
}

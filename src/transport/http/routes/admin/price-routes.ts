import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { ModelPriceSchema } from "../../../../../gen/generation/v1/model_pb.js";
import type { CoreClients } from "../../../../core/index.js";
import type { BodyGuard } from "../../edge/body-guard.js";
import { parseBody } from "../../json-mapping.js";
import { ADMIN_SCHEMAS as S } from "../../schemas/admin.js";
import { ADMIN_BODY, adminCall } from "./admin-call.js";

const priceJson = (price: Parameters<typeof toJson<typeof ModelPriceSchema>>[1]) =>
  toJson(ModelPriceSchema, price, { useProtoFieldName: true, alwaysEmitImplicit: true });

/** /admin/v1/prices: every model's prices, and a model's set. */
export function priceRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    app.get("/admin/v1/prices", { schema: S.listPrices }, async (request) => {
      const { prices } = await core.admin.listPrices({}, adminCall(request));
      return { prices: prices.map(priceJson) };
    });

    app.put<{ Params: { model: string } }>("/admin/v1/prices/:model", { ...guard(ADMIN_BODY), schema: S.updatePrice }, async (request) => {
      const price = parseBody(ModelPriceSchema, request.body);
      price.model = request.params.model;
      const response = await core.admin.updatePrice({ price }, adminCall(request));
      return priceJson(response.price!);
    });
  };
}

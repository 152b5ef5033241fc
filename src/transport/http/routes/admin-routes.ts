import type { FastifyInstance } from "fastify";
import type { CoreClients } from "../../../core/index.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { accountRoutes } from "./admin/account-routes.js";
import { keyRoutes } from "./admin/key-routes.js";
import { operationRoutes } from "./admin/operation-routes.js";
import { priceRoutes } from "./admin/price-routes.js";
import { sessionRoutes } from "./admin/session-routes.js";

/** The fixed admin contract under /admin/v1 (tools outside the project depend on it), one plugin per resource. */
export function adminRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    await app.register(accountRoutes(core, guard));
    await app.register(keyRoutes(core, guard));
    await app.register(sessionRoutes(core, guard));
    await app.register(operationRoutes(core, guard));
    await app.register(priceRoutes(core, guard));
  };
}

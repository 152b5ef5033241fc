import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance } from "fastify";
import { PanelSessionRole, type PanelSession } from "../../../../../gen/generation/v1/admin_service_pb.js";
import type { CoreClients } from "../../../../core/index.js";
import type { BodyGuard } from "../../edge/body-guard.js";
import { GatewayError } from "../../gateway-error.js";
import { ADMIN_SCHEMAS as S } from "../../schemas/admin.js";
import { ADMIN_BODY, adminCall } from "./admin-call.js";

function panelSessionJson(session: PanelSession) {
  return {
    session_id: session.sessionId,
    role: session.role === PanelSessionRole.OPERATOR ? "operator" : "owner",
    account_id: session.accountId === "" ? null : session.accountId,
    credential_id: session.credentialId === "" ? null : session.credentialId,
    create_time: session.createTime ? timestampDate(session.createTime).toISOString() : null,
    expire_time: session.expireTime ? timestampDate(session.expireTime).toISOString() : null,
  };
}

/** /admin/v1/panel-sessions: the web panel's open sessions, listed and ended by the operator. */
export function sessionRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    const withBody = guard(ADMIN_BODY);
    // attachValidation: the query is typed as text, so its one refusal (a repeated parameter) is ours to answer, as 400.
    app.get<{ Querystring: { limit?: string } }>(
      "/admin/v1/panel-sessions",
      { onRequest: withBody.onRequest, schema: S.listPanelSessions, attachValidation: true },
      async (request) => {
        if (request.validationError) throw new GatewayError(400, "invalid_query", request.validationError.message);
        const text = request.query.limit;
        // Digits only, so no text becomes a number the proto's int32 would bend; the range is the core's (400 invalid_limit).
        if (text !== undefined && !/^[0-9]{1,4}$/.test(text)) throw new GatewayError(400, "invalid_limit", "limit must be an integer from 1 to 1000");
        const { sessions } = await core.admin.listPanelSessions({ limit: text === undefined ? undefined : Number(text) }, adminCall(request));
        return { sessions: sessions.map(panelSessionJson) };
      },
    );

    app.delete<{ Params: { sessionId: string } }>("/admin/v1/panel-sessions/:sessionId", { ...withBody, schema: S.revokePanelSession }, async (request) => {
      const response = await core.admin.revokePanelSession({ sessionId: request.params.sessionId }, adminCall(request));
      return { session_id: response.sessionId, revoked: response.revoked };
    });
  };
}

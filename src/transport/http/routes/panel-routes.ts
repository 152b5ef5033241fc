import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import { Code, ConnectError } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { SessionRole, type StartSessionResponse } from "../../../../gen/generation/v1/account_service_pb.js";
import type { CoreClients } from "../../../core/index.js";
import { platformCall, requestCall } from "../call-options.js";
import { hasBody, refuseBody } from "../edge/body-guard.js";
import { cookieValue, SESSION_COOKIE } from "../../rpc/credentials.js";
import { GatewayError } from "../gateway-error.js";
import { PLATFORM_ERRORS } from "../schemas/common.js";
import { PANEL_SESSION_SCHEMA, PANEL_SIGN_IN_SCHEMA, PANEL_SIGN_OUT_SCHEMA } from "../schemas/panel.js";

/**
 * Where `npm run build:panel` (Vite) puts the panel, hashed assets and one index.html: `panel/dist` at the
 * repository's root, four directories above this module in `src/` and five in a compiled tree (`dist/src/`, what
 * `npm start` runs). The first of the two that holds a built panel; the source layout's when neither does.
 */
export const PANEL_DIST = panelDist(dirname(fileURLToPath(import.meta.url)));

function panelDist(here: string): string {
  const candidates = [join(here, "..", "..", "..", "..", "panel", "dist"), join(here, "..", "..", "..", "..", "..", "panel", "dist")];
  return candidates.find((dir) => existsSync(join(dir, "index.html"))) ?? candidates[0]!;
}

/**
 * What a browser may do with the panel's pages: load its own scripts, styles and
 * images (results are served by this port), call this port, be framed by nobody.
 */
const PANEL_POLICY =
  "default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; script-src 'self'; " +
  "style-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

function sessionJson(answer: StartSessionResponse) {
  return {
    role: answer.role === SessionRole.OPERATOR ? "operator" : "owner",
    account_id: answer.accountId === "" ? null : answer.accountId,
    csrf_token: answer.csrfToken,
    expire_time: timestampDate(answer.expireTime!).toISOString(),
  };
}

export interface PanelRoutesOptions {
  /** Where the built panel is (default PANEL_DIST). */
  readonly distDir?: string;
  /** PUBLIC_BASE_URL is https: the cookie is Secure whatever the hop to this port was. */
  readonly httpsOrigin?: boolean;
}

/**
 * The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Secure when
 * the request came over HTTPS (TLS here, or X-Forwarded-Proto from a proxy TRUST_PROXY trusts) or the public origin is https.
 */
function sessionCookie(request: FastifyRequest, value: string, maxAgeSeconds: number, httpsOrigin: boolean): string {
  const secure = httpsOrigin || request.protocol === "https" ? "; Secure" : "";
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure}`;
}

const noBody = async (request: FastifyRequest, reply: FastifyReply) => {
  if (hasBody(request)) {
    return refuseBody(request, reply, new GatewayError(400, "body_not_expected", "send the token as Authorization: Bearer, with no body"));
  }
};

/**
 * The web panel (issue 11): its session routes, which only turn a credential
 * into a cookie and back through AccountService.StartSession, and its
 * built assets under /panel/. Every other thing the panel does is an RPC of
 * the Connect mount, with the cookie passed on as x-panel-session.
 */
export function panelRoutes(core: CoreClients, { distDir = PANEL_DIST, httpsOrigin = false }: PanelRoutesOptions = {}) {
  return async (app: FastifyInstance) => {
    app.post("/panel/session", { schema: PANEL_SIGN_IN_SCHEMA, onRequest: noBody }, async (request, reply) => {
      const answer = await core.account.startSession({}, platformCall(request, reply));
      const seconds = Math.max(0, Math.floor((timestampDate(answer.expireTime!).getTime() - Date.now()) / 1000));
      reply.header("set-cookie", sessionCookie(request, answer.session, seconds, httpsOrigin));
      reply.header("cache-control", "no-store");
      return sessionJson(answer);
    });

    app.get("/panel/session", { schema: PANEL_SESSION_SCHEMA }, async (request, reply) => {
      const headers = new Headers();
      const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
      if (session) headers.set("x-panel-session", session);
      const answer = await core.account.startSession({}, requestCall(reply, headers));
      reply.header("cache-control", "no-store");
      return sessionJson(answer);
    });

    app.delete("/panel/session", { schema: PANEL_SIGN_OUT_SCHEMA, onRequest: noBody }, async (request, reply) => {
      const session = cookieValue(request.headers.cookie, SESSION_COOKIE);
      if (session) {
        const headers = new Headers({ "x-panel-session": session });
        // The core ends the session for good; a cookie that holds no session of ours has nothing to end.
        await core.account.endSession({}, requestCall(reply, headers)).catch((error: unknown) => {
          if (!(error instanceof ConnectError && error.code === Code.Unauthenticated)) throw error;
        });
      }
      reply.header("set-cookie", sessionCookie(request, "", 0, httpsOrigin));
      reply.header("cache-control", "no-store");
      return reply.code(204).send();
    });

    app.get("/panel", { schema: { hide: true, response: { 308: { type: "null" }, ...PLATFORM_ERRORS } } }, async (_request, reply) => reply.redirect("/panel/", 308));

    if (!existsSync(join(distDir, "index.html"))) {
      app.get("/panel/*", { schema: { hide: true, response: { ...PLATFORM_ERRORS } } }, async () => {
        throw new GatewayError(404, "panel_not_built", "the web panel is not built in this installation: run npm run build:panel");
      });
      return;
    }
    await app.register(fastifyStatic, {
      root: distDir,
      prefix: "/panel/",
      index: ["index.html"],
      wildcard: true,
      schemaHide: true,
      // The build leaves .br and .gz copies beside each file (panel/vite.config.ts): sent as the browser accepts.
      preCompressed: true,
      // Vite names every asset by its content: cached for a year; the page itself is checked every time.
      cacheControl: false,
      setHeaders(reply, path) {
        const hashed = /[\\/]assets[\\/]/.test(path);
        reply.header("cache-control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
        reply.header("content-security-policy", PANEL_POLICY);
        reply.header("x-content-type-options", "nosniff");
        reply.header("referrer-policy", "no-referrer");
      },
    });
  };
}

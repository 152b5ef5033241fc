import { StartSessionResponseSchema } from "../../../../gen/generation/v1/account_service_pb.js";
import { PANEL_SESSION_SECURITY, PANEL_SIGN_IN_SECURITY, operation } from "./common.js";
import { describedFields } from "./proto-json-schema.js";

/**
 * The web panel's session (issue 11): a credential exchanged for an HttpOnly,
 * SameSite=Strict cookie. The credential travels in `authorization`, never in
 * a body, so it is checked before anything is read.
 */
const SESSION = {
  type: "object",
  properties: describedFields(StartSessionResponseSchema, {
    role: { type: "string", enum: ["owner", "operator"] },
    account_id: { type: ["string", "null"], description: "The owner's account; null for the operator." },
    csrf_token: { type: "string" },
    expire_time: { type: "string", format: "date-time" },
  }),
  required: ["role", "account_id", "csrf_token", "expire_time"],
} as const;

export const PANEL_SIGN_IN_SCHEMA = operation(
  "panel", "startPanelSession", "Sign in to the web panel: an owner token (or the admin token) becomes a session cookie", PANEL_SIGN_IN_SECURITY, {
  description:
    "Send the owner token (or the admin token) as `Authorization: Bearer`, with no body. The answer sets `gs_session` (HttpOnly, " +
    "SameSite=Strict, Path=/, twelve hours; Secure over HTTPS, from a proxy TRUST_PROXY trusts too, or when PUBLIC_BASE_URL is https) and returns the session's CSRF token. A bad credential is 401; an API key is 403 owner_credential_required.",
  body: { description: "None: the credential travels in Authorization (a body is 400 body_not_expected)." },
  response: { 200: SESSION },
});

export const PANEL_SESSION_SCHEMA = operation(
  "panel", "getPanelSession", "The panel session of the cookie, with its CSRF token", PANEL_SESSION_SECURITY, {
  description: "401 (missing_credential, invalid_session, session_expired, session_revoked) without a valid session cookie.",
  response: { 200: SESSION },
});

export const PANEL_SIGN_OUT_SCHEMA = operation("panel", "endPanelSession", "Sign out: the session is ended and its cookie cleared", [], {
  description:
    "Ends the session of the `gs_session` cookie in the core (AccountService.EndSession): a saved copy of the cookie is refused from then on " +
    "(401 session_revoked). Needs no CSRF token; without a cookie, or with one that holds no session, it only clears the cookie.",
  response: { 204: { type: "null", description: "The cookie is cleared." } },
});

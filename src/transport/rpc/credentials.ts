import type { FastifyRequest } from "fastify";

/** The headers that carry a caller's credentials, as the core reads them (a panel session goes with its CSRF token). */
export const CREDENTIAL_HEADERS = ["authorization", "x-vendor-api-key", "x-panel-session", "x-csrf-token"] as const;

/** The web panel's session cookie (HttpOnly, SameSite=Strict): the gateway passes it on as x-panel-session. */
export const SESSION_COOKIE = "gs_session";

/** A cookie's value from a Cookie header ("a=1; b=2"), or undefined. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  for (const pair of (header ?? "").split(";")) {
    const at = pair.indexOf("=");
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/** Only the credentials of `headers` (what the gateway passes on and checks), the session cookie as x-panel-session. */
export function credentialsOf(headers: Headers | FastifyRequest["headers"]): Headers {
  const read = (name: string) => {
    const value = headers instanceof Headers ? headers.get(name) : headers[name];
    return typeof value === "string" ? value : undefined;
  };
  const credentials = new Headers();
  for (const name of CREDENTIAL_HEADERS) {
    const value = read(name);
    if (value !== undefined) credentials.set(name, value);
  }
  const session = cookieValue(read("cookie"), SESSION_COOKIE);
  if (session && !credentials.has("x-panel-session")) credentials.set("x-panel-session", session);
  return credentials;
}

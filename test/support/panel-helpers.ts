import assert from "node:assert/strict";
import { ADMIN_TOKEN, type TestService } from "./harness.js";

/** The web panel's session and RPCs as a browser makes them, over the gateway's real HTTP port (issue 11). */

export interface Signed {
  readonly cookie: string;
  readonly csrf: string;
  readonly setCookie: string;
  readonly json: any;
}

export async function signIn(service: TestService, token: string): Promise<Signed> {
  const response = await fetch(`${service.url}/panel/session`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
  const json = (await response.json()) as any;
  assert.equal(response.status, 200, JSON.stringify(json));
  const setCookie = response.headers.get("set-cookie") ?? "";
  return { cookie: setCookie.split(";")[0]!, csrf: json.csrf_token, setCookie, json };
}

/** A Connect unary call with JSON, as the panel's client makes it. */
export async function rpc(service: TestService, method: string, body: unknown, headers: Record<string, string>) {
  const response = await fetch(`${service.url}/generation.v1.${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined, text };
}

export const reasonOf = (json: any) => json?.details?.[0]?.debug?.reason ?? json?.code;

export async function ownerToken(service: TestService, accountId: string): Promise<{ token: string; id: string }> {
  const issued = await rpc(service, "AdminService/CreateOwnerToken", { accountId }, { authorization: `Bearer ${ADMIN_TOKEN}` });
  assert.equal(issued.status, 200, issued.text);
  assert.match(issued.json.ownerToken, /^gso_/);
  return { token: issued.json.ownerToken, id: issued.json.tokenId };
}


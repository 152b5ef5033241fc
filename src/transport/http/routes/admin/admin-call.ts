import type { FastifyRequest } from "fastify";
import { callerValues } from "../../call-options.js";
import type { BodyRoute } from "../../edge/body-guard.js";
import { GatewayError } from "../../gateway-error.js";

/** Every admin route that may receive a body (POST, PUT, PATCH, DELETE): the admin token is checked before the body is read. */
export const ADMIN_BODY: BodyRoute = { credential: "admin", keyFrom: "platform", images: false };

/** The call options of an admin route: its admin token (or panel session, via the core) and the caller's values. */
export const adminCall = (request: FastifyRequest) => {
  const headers = new Headers();
  if (request.headers.authorization) headers.set("authorization", request.headers.authorization);
  return { headers, contextValues: callerValues(request) };
};

/** A body's fields, as its route schema let them through (types checked there; null means "not set"). */
export interface Body { [key: string]: unknown }

export function stringField(body: unknown, field: string, required = true): string {
  const value = (body as Body | undefined)?.[field] as string | null | undefined;
  if (value === undefined || value === null) {
    if (required) throw new GatewayError(422, "validation_failed", `${field} is required`);
    return "";
  }
  return value;
}

export const booleanField = (body: unknown, field: string) => (body as Body)[field] as boolean;

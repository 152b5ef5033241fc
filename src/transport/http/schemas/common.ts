/**
 * Shapes shared by the gateway's routes: the two error bodies, money, and the
 * security schemes the OpenAPI document names. Every route's schema is built
 * from these, so a shape is written once.
 */

/** A decimal amount of US dollars as a string, where the field's proto comment describes it. */
export const DECIMAL = { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?$" } as const;

/** A decimal amount of US dollars as a string; never a JSON number (a float). */
export const MONEY = {
  ...DECIMAL,
  // OpenAPI's extension keyword: validation names the field money by it, whatever its description says.
  "x-money": true,
  description: "Decimal US dollars as a string (never a JSON number), e.g. \"10.00\" or \"0.0000375\".",
} as const;

/** Money in a request: a string (a JSON number is refused, never rounded); its syntax is the domain's rule. */
export const MONEY_INPUT = { type: "string", "x-money": true, description: MONEY.description } as const;

/** `/api/v1`, `/admin/v1`, `/files`: {"error": {"code": "<snake_case reason>", "message": "..."}}. */
export const PLATFORM_ERROR = {
  type: "object",
  description: "Every error of /api/v1, /admin/v1 and /files. `code` is a stable snake_case reason (e.g. insufficient_funds).",
  properties: {
    error: {
      type: "object",
      properties: { code: { type: "string" }, message: { type: "string" } },
      required: ["code", "message"],
    },
  },
  required: ["error"],
  examples: [{ error: { code: "insufficient_funds", message: "the available balance does not cover this request" } }],
} as const;

/** `/api/aimodel`: the vendor's error body, with an ErrorInfo detail carrying this service's reason. */
export const VENDOR_ERROR = {
  type: "object",
  description: "Every error of /api/aimodel: the vendor's shape (HTTP status, canonical status name, ErrorInfo with the reason).",
  properties: {
    error: {
      type: "object",
      properties: {
        code: { type: "integer" },
        message: { type: "string" },
        status: { type: "string" },
        details: {
          type: "array",
          items: {
            type: "object",
            properties: { "@type": { type: "string" }, reason: { type: "string" }, domain: { type: "string" } },
          },
        },
      },
      required: ["code", "message", "status"],
    },
  },
  required: ["error"],
} as const;

/** Error responses of a platform route (any 4xx/5xx status: they all share the shape). */
export const PLATFORM_ERRORS = { "4xx": PLATFORM_ERROR, "5xx": PLATFORM_ERROR } as const;
/** Error responses of a vendor route. */
export const VENDOR_ERRORS = { "4xx": VENDOR_ERROR, "5xx": VENDOR_ERROR } as const;

export const BALANCE = {
  type: "object",
  properties: { balance: MONEY, reserved: MONEY, available: MONEY, currency: { type: "string", enum: ["USD"] } },
  required: ["balance", "reserved", "available", "currency"],
  examples: [{ balance: "10.00", reserved: "0.134", available: "9.866", currency: "USD" }],
} as const;

/** The security schemes of the document (components.securitySchemes). */
export const SECURITY_SCHEMES = {
  apiKey: { type: "http", scheme: "bearer", description: "The platform API key: `Authorization: Bearer <API_KEY>` (/api/v1)." },
  adminToken: { type: "http", scheme: "bearer", description: "The operator's ADMIN_TOKEN: `Authorization: Bearer <ADMIN_TOKEN>` (/admin/v1)." },
  vendorKey: { type: "apiKey", in: "header", name: "x-vendor-api-key", description: "The same platform key, on /api/aimodel." },
  googApiKey: { type: "apiKey", in: "header", name: "x-goog-api-key", description: "The same platform key, as the vendor's SDKs send it." },
  keyQuery: { type: "apiKey", in: "query", name: "key", description: "The same platform key in the query (vendor surface)." },
  ownerToken: { type: "http", scheme: "bearer", description: "An account owner's token (`gso_…`, AdminService.CreateOwnerToken): signs in to the web panel." },
  panelSession: { type: "apiKey", in: "cookie", name: "gs_session", description: "The web panel's session cookie (POST /panel/session sets it)." },
} as const;

/** A route's accepted credentials (any one of the list). */
type Security = readonly { readonly [scheme: string]: readonly string[] }[];
export const PLATFORM_SECURITY: Security = [{ apiKey: [] }];
export const ADMIN_SECURITY: Security = [{ adminToken: [] }];
export const PANEL_SIGN_IN_SECURITY: Security = [{ ownerToken: [] }, { adminToken: [] }];
export const PANEL_SESSION_SECURITY: Security = [{ panelSession: [] }];
export const VENDOR_SECURITY: Security = [{ vendorKey: [] }, { googApiKey: [] }, { keyQuery: [] }];

/** A route's schema: its operation under `tag`, the credentials it takes, and the surface's errors beside its own answers. */
export function operation(
  tag: string, operationId: string, summary: string, security: Security,
  { response, ...parts }: { response: object; [part: string]: unknown }, errors: object = PLATFORM_ERRORS,
) {
  return { tags: [tag], operationId, summary, security, ...parts, response: { ...response, ...errors } };
}

/** The Idempotency-Key request header of the creating routes. */
export const IDEMPOTENCY_HEADERS = {
  type: "object",
  properties: {
    "idempotency-key": {
      type: "string",
      description: "Makes a retry safe: a repeat with the same key (per account, kept 24 h) returns the original answer and charges nothing.",
    },
  },
} as const;

import { createClient, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AccountService } from "../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { BAD_REQUEST_REASONS } from "../../src/domain/errors/domain-error.js";
import { PROVIDER_FAILURES } from "../../src/ports/provider.js";
import { restStatusTable } from "../../src/transport/http/error-status.js";

/**
 * The panel's clients: the same RPCs every other client calls, on this
 * origin's Connect mount. The session is the HttpOnly cookie (the browser
 * sends it; no script can read it); every call carries the session's CSRF
 * token, which a page of another site cannot know.
 */
let csrfToken = "";

export function useCsrfToken(token: string): void {
  csrfToken = token;
}

const withCsrf: Interceptor = (next) => async (request) => {
  if (csrfToken) request.header.set("x-csrf-token", csrfToken);
  return next(request);
};

const transport = createConnectTransport({
  baseUrl: location.origin,
  interceptors: [withCsrf],
  fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
});

export const account = createClient(AccountService, transport);
export const admin = createClient(AdminService, transport);
export const generation = createClient(GenerationService, transport);
export const text = createClient(TextService, transport);

// REST's table, from the core's declared reasons (both free of Node): the status shown is the one REST answers.
const httpStatusOf = restStatusTable({ badRequest: BAD_REQUEST_REASONS, providerFailures: PROVIDER_FAILURES });

/** What a failed call says: REST's status for its code and reason (ErrorDetail), and its message. */
export function describeFailure(error: unknown): { status: number; reason: string; message: string } {
  const failure = ConnectError.from(error);
  const detail = failure.findDetails(ErrorDetailSchema)[0];
  return { status: detail ? httpStatusOf(failure.code, detail.reason) : 0, reason: detail?.reason ?? failure.code.toString(), message: failure.rawMessage };
}

/**
 * Downloads a CSV export of the REST API (statement, usage) as the session: the gateway takes the session cookie
 * with its CSRF token on these GETs that ask for text/csv (docs/panel.md). The service streams the file; the
 * browser saves what arrived under the file name the service gave.
 */
export async function downloadCsv(path: string): Promise<string> {
  const response = await fetch(path, { credentials: "same-origin", headers: { accept: "text/csv", "x-csrf-token": csrfToken } });
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    throw new Error(`${response.status} ${body.error?.code ?? "download_failed"}: ${body.error?.message ?? response.statusText}`);
  }
  const filename = /filename="([^"]+)"/.exec(response.headers.get("content-disposition") ?? "")?.[1] ?? "export.csv";
  const url = URL.createObjectURL(await response.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return filename;
}

import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { BAD_REQUEST_REASONS, PROVIDER_FAILURES } from "../../core/index.js";
import { restStatusTable } from "./error-status.js";

export interface HttpError {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly code: Code;
  readonly retryAfterSeconds?: number;
}

/** REST's status of an error of `code` with `reason` (undefined: the error carries no ErrorDetail). */
export const httpStatusOf = restStatusTable({ badRequest: BAD_REQUEST_REASONS, providerFailures: PROVIDER_FAILURES });

/** A code's name in snake_case ("invalid_argument"), as the canonical names spell it. */
export const codeName = (code: Code) => Code[code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

/** The REST answer to an error from the core (in process or remote): its status decided here, an internal message hidden. */
export function httpErrorOf(error: unknown): HttpError {
  const connectError = ConnectError.from(error);
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  const status = httpStatusOf(connectError.code, detail?.reason);
  const internal = status >= 500 && !detail;
  return {
    status,
    code: connectError.code,
    reason: detail?.reason || (internal ? "internal_error" : codeName(connectError.code)),
    message: internal ? "internal error" : connectError.rawMessage,
    retryAfterSeconds: detail?.retryAfterSeconds || undefined,
  };
}

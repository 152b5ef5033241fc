import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { httpStatusOf } from "../http/error-status.js";

const typeNameOf = (detail: ConnectError["details"][number]) => ("desc" in detail ? detail.desc.typeName : detail.type);

/**
 * A failure as the RPC ports answer it: its ErrorDetail's `http_status`
 * (deprecated; kept for the clients that still read it) filled from the REST
 * edge's table (httpStatusOf), since the core no longer chooses a status.
 * Anything else, or a failure without ErrorDetail, is left as it is.
 */
export function withHttpStatus<E>(error: E): E {
  if (!(error instanceof ConnectError)) return error;
  const [detail] = error.findDetails(ErrorDetailSchema);
  if (!detail) return error;
  const httpStatus = httpStatusOf(error.code, detail.reason);
  if (detail.httpStatus === httpStatus) return error;
  // A new array: a forwarded failure may share its details with the one it was received as.
  error.details = error.details.map((each) =>
    typeNameOf(each) === ErrorDetailSchema.typeName ? { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { ...detail, httpStatus }) } : each,
  );
  return error;
}

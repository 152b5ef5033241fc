import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { httpStatusOf } from "../http/connect-errors.js";

const typeNameOf = (detail: ConnectError["details"][number]) => ("desc" in detail ? detail.desc.typeName : detail.type);

/** A failure with its ErrorDetail's deprecated `http_status` filled from REST's table, for the clients that still read it. */
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

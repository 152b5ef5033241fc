import type { ServiceImpl } from "@connectrpc/connect";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import { checkFileAccess } from "../../domain/files/signed-urls.js";
import type { CoreDeps } from "../core-deps.js";
import { toConnectError } from "../errors/rpc-errors.js";

export function createFileService(deps: CoreDeps): ServiceImpl<typeof FileService> {
  return {
    async *readFile(request) {
      const nowUnix = Math.floor(deps.clock.now().getTime() / 1000);
      const access = checkFileAccess(deps.settingsOf.urlSigningSecret, request.key, Number(request.expires), request.signature, nowUnix);
      if (access !== "granted") {
        const why = access === "expired" ? "the link has expired; read the job again for a fresh one" : "the link's signature is invalid";
        throw toConnectError(new DomainError("permission_denied", `link_${access}`, why));
      }
      const blob = await deps.blobs.open(request.key);
      if (!blob) throw toConnectError(new DomainError("not_found", "file_not_found", "no such file"));
      let first = true;
      for await (const data of blob.chunks) {
        yield first ? { contentType: blob.contentType, size: BigInt(blob.size), data } : { data };
        first = false;
      }
      if (first) yield { contentType: blob.contentType, size: 0n };
    },
  };
}

import { signFile } from "../../domain/files/signed-urls.js";
import type { CoreSettings } from "../core-deps.js";

/** A fresh signed URL for a stored output: regenerated on every read of the job. */
export function signedResultUrl(settings: CoreSettings, blobKey: string, now: Date): string {
  const expires = Math.floor(now.getTime() / 1000) + settings.resultUrlTtlSeconds;
  const signature = signFile(settings.urlSigningSecret, blobKey, expires);
  return `${settings.publicBaseUrl}/files/${blobKey}?expires=${expires}&signature=${signature}`;
}

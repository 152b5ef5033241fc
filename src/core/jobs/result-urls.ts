import { signFile } from "../../domain/files/signed-urls.js";
import { LRUCache } from "lru-cache";
import type { CoreSettings } from "../core-deps.js";

/** Result URLs signed in the current second, per core's settings: a job polled a thousand times a second is signed once. */
const signedThisSecond = new WeakMap<CoreSettings, LRUCache<string, { readonly expires: number; readonly url: string }>>();

/** A fresh signed URL for a stored output, valid `resultUrlTtlSeconds` from `now` (to the second): regenerated on every read of the job. */
export function signedResultUrl(settings: CoreSettings, blobKey: string, now: Date): string {
  const expires = Math.floor(now.getTime() / 1000) + settings.resultUrlTtlSeconds;
  let recent = signedThisSecond.get(settings);
  if (!recent) signedThisSecond.set(settings, (recent = new LRUCache({ max: 4_096 })));
  const last = recent.get(blobKey);
  if (last?.expires === expires) return last.url;
  const signature = signFile(settings.urlSigningSecret, blobKey, expires);
  const url = `${settings.publicBaseUrl}/files/${blobKey}?expires=${expires}&signature=${signature}`;
  recent.set(blobKey, { expires, url });
  return url;
}

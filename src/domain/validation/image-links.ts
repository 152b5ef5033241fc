import { badRequest, invalid } from "../errors/domain-error.js";
import type { ValidationLimits } from "./limits.js";
import { checkTextLength, MAX_URL_CHARACTERS } from "./text-fields.js";
import { isHttpUrl } from "./urls.js";

/**
 * Images a synchronous call names by address (the vendor's `fileData`, OpenAI's http(s) `image_url`), under the
 * rules of a job's `input_images_urls`: an http(s) URL of at most 2,048 characters, at most `maxInputImages` of
 * them, at most `maxInputBytes` fetched in all, and images only. The service fetches each before anything is held.
 */
export interface ImageLink {
  /** Where the request names it, for example `contents[0].parts[1].fileData.fileUri`. */
  readonly field: string;
  readonly url: string;
  /** The media type the caller declares; empty when none. */
  readonly mimeType: string;
}

const isImageType = (mimeType: string) => /^image\/[\w.+-]+$/.test(mimeType);

/** The media type as sent upstream: lower case, without parameters. */
export const bareMediaType = (mimeType: string) => mimeType.split(";")[0]!.trim().toLowerCase();

/** Every link checked before the first is fetched; nothing is fetched for a request these rules refuse. */
export function checkImageLinks(links: readonly ImageLink[], limits: Pick<ValidationLimits, "maxInputImages">): void {
  if (links.length > limits.maxInputImages) {
    throw invalid("too_many_input_images", `at most ${limits.maxInputImages} linked images per request (got ${links.length})`, {
      field: links[limits.maxInputImages]!.field, limit: limits.maxInputImages,
    });
  }
  for (const link of links) {
    checkTextLength(link.field, link.url, MAX_URL_CHARACTERS);
    if (!isHttpUrl(link.url)) {
      const why = `${link.field} must be an http:// or https:// URL (this service stores no files)`;
      throw invalid("invalid_input_image_url", why, { field: link.field });
    }
    if (link.mimeType !== "" && !isImageType(bareMediaType(link.mimeType))) {
      const why = `${link.field}: a linked file must be an image (mimeType "${link.mimeType}")`;
      throw badRequest("unsupported_media_type", why, { field: link.field });
    }
  }
}

/** A fetch that failed, in the jobs' terms (their `missing_input_images`): `reason` is the fetcher's public one. */
export const unfetchedImage = (link: ImageLink, reason: string) =>
  invalid("missing_input_images", `${link.field}: the image could not be fetched: ${reason}`, { field: link.field });

/** The media type the server answered with, checked: an image type, else 400 unsupported_media_type. */
export function fetchedImageType(link: ImageLink, answered: string): string {
  const type = bareMediaType(answered);
  if (!isImageType(type)) {
    const shown = type === "" ? "no Content-Type" : `Content-Type ${type.slice(0, 100)}`;
    throw badRequest("unsupported_media_type", `${link.field}: the server answered ${shown}, not an image`, { field: link.field });
  }
  return type;
}

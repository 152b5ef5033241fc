import { create } from "@bufbuild/protobuf";
import { BlobSchema, type Content, type Part } from "../../../gen/generation/v1/text_service_pb.js";
import { checkImageLinks, fetchedImageType, unfetchedImage, type ImageLink } from "../../domain/validation/image-links.js";
import type { ValidationLimits } from "../../domain/validation/limits.js";
import type { InputFetcher } from "../../ports/input-fetcher.js";
import { publicReason } from "../workers/generation/run-job.js";
import { requireGrant, type Caller } from "../auth/api-key-auth.js";
import { requireKnownModel } from "../../domain/validation/generation-request.js";

/** What fetching linked images needs: the jobs' fetcher (its address policy, timeout and size bound) and the input limits. */
export interface ImageLinkPorts {
  readonly inputs: InputFetcher;
  readonly limits: Pick<ValidationLimits, "maxInputImages" | "maxInputBytes">;
}

/** The ports and limits of a fetch, from what a service holds. */
export const imageLinkPorts = (deps: { readonly inputs: InputFetcher; readonly settingsOf: { readonly limits: ValidationLimits } }): ImageLinkPorts =>
  ({ inputs: deps.inputs, limits: deps.settingsOf.limits });

interface Located {
  readonly part: Part;
  readonly link: ImageLink;
}

/** The request's fileData parts with where each is (systemInstruction's first, as the upstream reads them). */
function linkedParts(contents: readonly Content[], systemInstruction: Content | undefined): Located[] {
  const found: Located[] = [];
  const scan = (parts: readonly Part[], at: string) =>
    parts.forEach((part, j) => {
      if (part.data.case !== "fileData") return;
      const { fileUri: url, mimeType } = part.data.value;
      found.push({ part, link: { field: `${at}[${j}].fileData.fileUri`, url, mimeType } });
    });
  if (systemInstruction) scan(systemInstruction.parts, "systemInstruction.parts");
  contents.forEach((content, i) => scan(content.parts, `contents[${i}].parts`));
  return found;
}

/**
 * Fetches every linked image, one after the other within one byte budget (what inline parts left of
 * `maxInputBytes`, as a job's inputs share it), and turns its part into inline data: from then on the call is
 * the same as if the caller had sent the bytes. Runs before anything is held, so a refusal moves no money.
 */
export async function inlineImageLinks(
  ports: ImageLinkPorts, contents: readonly Content[], systemInstruction: Content | undefined, signal: AbortSignal,
): Promise<void> {
  const linked = linkedParts(contents, systemInstruction);
  if (linked.length === 0) return;
  checkImageLinks(linked.map(({ link }) => link), ports.limits);
  const parts = [...(systemInstruction?.parts ?? []), ...contents.flatMap((content) => content.parts)];
  let budget = ports.limits.maxInputBytes - parts.reduce((sum, p) => sum + (p.data.case === "inlineData" ? p.data.value.data.length : 0), 0);
  for (const { part, link } of linked) {
    let image: { bytes: Uint8Array; mimeType: string };
    try {
      image = await ports.inputs.fetch(link.url, signal, Math.max(0, budget));
    } catch (error) {
      // The caller went away: its own cancellation, not a refusal of the link.
      if (signal.aborted) throw error;
      throw unfetchedImage(link, publicReason(error));
    }
    budget -= image.bytes.length;
    part.data = { case: "inlineData", value: create(BlobSchema, { mimeType: fetchedImageType(link, image.mimeType), data: image.bytes }) };
  }
}

/** A generateContent call's linked images inlined, once the caller may use the model: nothing is fetched for a call its grants refuse. */
export async function inlineCallLinks(
  ports: ImageLinkPorts,
  caller: Caller,
  request: { readonly model: string; readonly contents: readonly Content[]; readonly systemInstruction?: Content },
  signal: AbortSignal,
): Promise<void> {
  if (linkedParts(request.contents, request.systemInstruction).length === 0) return;
  requireGrant(caller, requireKnownModel(request.model));
  await inlineImageLinks(ports, request.contents, request.systemInstruction, signal);
}

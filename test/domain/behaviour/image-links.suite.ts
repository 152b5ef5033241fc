import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../../src/domain/errors/domain-error.js";
import { bareMediaType, checkImageLinks, fetchedImageType, unfetchedImage, type ImageLink } from "../../../src/domain/validation/image-links.js";

const link = (url: string, mimeType = "", field = "contents[0].parts[1].fileData.fileUri"): ImageLink => ({ field, url, mimeType });

/** "category:reason:field:limit | message" of a refusal, or "accepted". */
function outcome(work: () => unknown): string {
  try {
    work();
    return "accepted";
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return `${error.category}:${error.reason}:${error.facts.field ?? ""}:${error.facts.limit ?? ""} | ${error.message}`;
  }
}

const check = (links: ImageLink[], maxInputImages = 3) => outcome(() => checkImageLinks(links, { maxInputImages }));

describe("images named by address in a synchronous call (issue 38): a job's input_images_urls rules", () => {
  it("when every link is an http or https URL within the count, then all pass, whatever their declared image type", () => {
    assert.equal(check([link("http://a.example/x.png"), link("HTTPS://b.example/y", "image/jpeg"), link("https://c.example/z", "IMAGE/PNG; q=1")]), "accepted");
    assert.equal(check([]), "accepted");
    assert.equal(check([link("https://a.example/1"), link("https://a.example/2")], 2), "accepted");
  });

  it("when there are more links than maxInputImages, then the first one past the limit is named with the limit", () => {
    const links = [1, 2, 3].map((i) => link(`https://a.example/${i}`, "", `contents[${i}].parts[0].fileData.fileUri`));
    assert.equal(check(links, 2), "invalid:too_many_input_images:contents[3].parts[0].fileData.fileUri:2 | at most 2 linked images per request (got 3)");
  });

  it("when a link is not http(s) (gs://, a file path, a host-less URL), then it is refused naming its field before anything is fetched", () => {
    for (const url of ["gs://bucket/a.png", "/etc/passwd", "http://", "ftp://a.example/x", "data:image/png;base64,AAAA"]) {
      assert.equal(check([link("https://ok.example/"), link(url, "", "contents[2].parts[0].fileData.fileUri")]),
        "invalid:invalid_input_image_url:contents[2].parts[0].fileData.fileUri: | " +
        "contents[2].parts[0].fileData.fileUri must be an http:// or https:// URL (this service stores no files)", url);
    }
  });

  it("when a link is longer than 2,048 characters, then it is field_too_long naming the field and the limit", () => {
    const long = `https://a.example/${"a".repeat(2048)}`;
    assert.equal(check([link(long)]),
      "bad_request:field_too_long:contents[0].parts[1].fileData.fileUri:2048 | contents[0].parts[1].fileData.fileUri may be at most 2048 characters");
    assert.equal(check([link(`https://a.example/${"a".repeat(2048 - 18)}`)]), "accepted");
  });

  it("when the declared type is not an image, then it is unsupported_media_type before the fetch", () => {
    for (const type of ["application/pdf", "text/html", "image", "image/", "imagex/png", "video/mp4", "ximage/png", "image/png,text/html"]) {
      assert.equal(check([link("https://a.example/x", type)]),
        `bad_request:unsupported_media_type:contents[0].parts[1].fileData.fileUri: | contents[0].parts[1].fileData.fileUri: a linked file must be an image (mimeType "${type}")`, type);
    }
  });

  it("when a media type carries parameters or capitals, then it is read bare and in lower case", () => {
    assert.equal(bareMediaType(" Image/PNG ; charset=x"), "image/png");
    assert.equal(bareMediaType("image/webp"), "image/webp");
    assert.equal(bareMediaType(""), "");
  });

  it("when the server answered an image type, then that type is what goes upstream, bare", () => {
    assert.equal(fetchedImageType(link("https://a.example/x"), "image/PNG; charset=binary"), "image/png");
    assert.equal(fetchedImageType(link("https://a.example/x"), "image/svg+xml"), "image/svg+xml");
  });

  it("when the server answered another type or none, then it is unsupported_media_type naming the field and what was answered", () => {
    assert.equal(outcome(() => fetchedImageType(link("https://a.example/x"), "text/html; charset=utf-8")),
      "bad_request:unsupported_media_type:contents[0].parts[1].fileData.fileUri: | contents[0].parts[1].fileData.fileUri: the server answered Content-Type text/html, not an image");
    assert.equal(outcome(() => fetchedImageType(link("https://a.example/x"), "")),
      "bad_request:unsupported_media_type:contents[0].parts[1].fileData.fileUri: | contents[0].parts[1].fileData.fileUri: the server answered no Content-Type, not an image");
    assert.equal(outcome(() => fetchedImageType(link("https://a.example/x"), `text/${"x".repeat(300)}`)),
      `bad_request:unsupported_media_type:contents[0].parts[1].fileData.fileUri: | contents[0].parts[1].fileData.fileUri: the server answered Content-Type text/${"x".repeat(95)}, not an image`);
  });

  it("when a fetch failed, then the refusal is the jobs' missing_input_images with the fetcher's public reason, naming the field", () => {
    const error = unfetchedImage(link("https://a.example/x"), "the address is not allowed");
    assert.deepEqual([error.category, error.reason, error.facts, error.message], [
      "invalid", "missing_input_images", { field: "contents[0].parts[1].fileData.fileUri" },
      "contents[0].parts[1].fileData.fileUri: the image could not be fetched: the address is not allowed",
    ]);
  });
});

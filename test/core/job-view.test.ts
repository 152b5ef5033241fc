// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CoreSettings } from "../../src/core/core-deps.js";
import { jobView } from "../../src/core/jobs/job-view.js";
import type { Job } from "../../src/domain/jobs/job.js";

const SETTINGS = {
  resultUrlTtlSeconds: 3_600, urlSigningSecret: Buffer.from("secret"), publicBaseUrl: "http://127.0.0.1:8080",
} as CoreSettings;

const doneJob = (): Job => ({
  id: "00000000-0000-4000-8000-000000000001",
  accountId: "acct",
  model: "aimodel-3-pro-image",
  kind: "image",
  status: "done",
  input: { prompt: "a lighthouse", inputImageUrls: [], inputBlobKeys: [], resolution: "2K" },
  createdAt: new Date("2025-01-02T03:04:05.678Z"),
  startedAt: new Date("2025-01-02T03:04:06.000Z"),
  finishedAt: new Date("2025-01-02T03:04:07.000Z"),
  timeoutSeconds: 60,
  reservationId: "job:1",
  reserved: 134_000_000_000n,
  charged: 134_000_000_000n,
  result: { blobKey: "results/1.png", mimeType: "image/png" },
  settled: true,
});

const AT = new Date("2026-01-01T00:00:00.100Z");
const SAME_SECOND = new Date("2026-01-01T00:00:00.900Z");
const NEXT_SECOND = new Date("2026-01-01T00:00:01.000Z");

describe("jobView", () => {
  it("when a frozen job is viewed twice within a second, then both reads get the same frozen view", () => {
    const stored = Object.freeze(doneJob());
    const first = jobView(stored, SETTINGS, AT);
    assert.strictEqual(jobView(stored, SETTINGS, SAME_SECOND), first);
    assert.ok(first.result?.imageUrl?.startsWith("http://127.0.0.1:8080/files/results/1.png?expires="));
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first.result!) && Object.isFrozen(first.usage!));
    assert.throws(() => {
      (first as { model: string }).model = "changed";
    }, TypeError);
  });

  it("when the second changes, then the view is made again with a result URL that expires a second later", () => {
    const stored = Object.freeze(doneJob());
    const first = jobView(stored, SETTINGS, AT);
    const later = jobView(stored, SETTINGS, NEXT_SECOND);
    assert.notStrictEqual(later, first);
    const expiry = (view: typeof first) => Number(new URL(view.result!.imageUrl!).searchParams.get("expires"));
    assert.equal(expiry(later), expiry(first) + 1);
    assert.deepEqual({ ...later, result: undefined }, { ...first, result: undefined });
  });

  it("when the job is not frozen (a store that may change it in place), then every read makes its own view", () => {
    const stored = doneJob();
    const first = jobView(stored, SETTINGS, AT);
    (stored as { status: Job["status"] }).status = "failed";
    const second = jobView(stored, SETTINGS, SAME_SECOND);
    assert.notStrictEqual(second, first);
    assert.equal(Object.isFrozen(second), false);
  });
});

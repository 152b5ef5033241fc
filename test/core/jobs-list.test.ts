// backends: embedded, real
/**
 * GET /api/v1/jobs and the ListJobs RPC (issue 10, "List"): the caller's jobs
 * newest first, filtered, in pages of 1 to 100 behind an opaque, signed cursor
 * that stays stable while jobs are being created; bad input is 400 in the
 * platform's error shape and changes nothing. Runs on both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../gen/generation/v1/job_pb.js";
import { balanceOf, call, createCustomer, eventually, finishedJob, startTestService, type Customer, type TestService } from "../support/harness.js";
import { assertPlatformError, postGeneration } from "../support/jobs-api-helpers.js";

const IMAGE = "aimodel-2.5-flash-image";
const TEXT = "aimodel-3.5-flash";

interface JobJson {
  job_id: string;
  status: string;
  model: string;
  created_at: string;
  result: { image_url: string | null } | null;
  [field: string]: unknown;
}

interface Page {
  jobs: JobJson[];
  next_page_token: string | null;
}

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "10" });
});

after(async () => {
  await service?.close();
});

async function createJob(customer: Customer, body: Record<string, unknown> = { model: IMAGE, prompt: "a kite", aspect_ratio: "1:1" }): Promise<string> {
  const response = await postGeneration(service, customer.apiKey, body);
  assert.equal(response.status, 202, response.text);
  return response.json.job_id as string;
}

async function list(customer: Customer, query = ""): Promise<Page> {
  const response = await call(service, "GET", `/api/v1/jobs${query}`, { key: customer.apiKey });
  assert.equal(response.status, 200, response.text);
  return response.json as Page;
}

/** Every page of a listing, in order. */
async function listAll(customer: Customer, query: Record<string, string> = {}): Promise<JobJson[][]> {
  const pages: JobJson[][] = [];
  let token: string | null = null;
  do {
    const params = new URLSearchParams({ ...query, ...(token ? { page_token: token } : {}) });
    const page = await list(customer, `?${params}`);
    pages.push(page.jobs);
    token = page.next_page_token;
  } while (token !== null);
  return pages;
}

/** Newest first: created_at descending, then job_id descending. */
function assertNewestFirst(jobs: JobJson[]): void {
  for (let i = 1; i < jobs.length; i++) {
    const [a, b] = [jobs[i - 1]!, jobs[i]!];
    const newer = a.created_at > b.created_at || (a.created_at === b.created_at && a.job_id > b.job_id);
    assert.ok(newer, `${a.job_id} (${a.created_at}) must come before ${b.job_id} (${b.created_at})`);
  }
}

/** A job's JSON without its signed link's query (it is signed anew, with a new expiry, on every read). */
function comparable(job: JobJson): JobJson {
  const url = job.result?.image_url;
  return url ? { ...job, result: { ...job.result!, image_url: url.split("?")[0]! } } : job;
}

async function allFinished(customer: Customer, ids: string[]): Promise<void> {
  for (const id of ids) await finishedJob(service, customer.apiKey, id);
}

describe("listing jobs (GET /api/v1/jobs)", () => {
  it("when an account has jobs, then they are listed newest first, each exactly as GET /api/v1/jobs/{id} answers it", async () => {
    const customer = await createCustomer(service, "10.00");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await createJob(customer));
    await allFinished(customer, ids);

    const page = await list(customer);
    assert.equal(page.next_page_token, null);
    assert.deepEqual(new Set(page.jobs.map((job) => job.job_id)), new Set(ids));
    assertNewestFirst(page.jobs);
    for (const job of page.jobs) {
      const single = await call(service, "GET", `/api/v1/jobs/${job.job_id}`, { key: customer.apiKey });
      assert.deepEqual(comparable(job), comparable(single.json), job.job_id);
    }
    assert.equal(page.jobs[0]!.job_id, ids[ids.length - 1], "the job created last comes first");
  });

  it("when an account has no jobs, then the listing is empty and has no next page", async () => {
    const customer = await createCustomer(service);
    assert.deepEqual(await list(customer), { jobs: [], next_page_token: null });
  });

  it("when a status, a model or a time range is given, then exactly the jobs matching all of them are listed", async () => {
    const customer = await createCustomer(service, "20.00");
    const done = [await createJob(customer), await createJob(customer)];
    const failed = await createJob(customer, { model: IMAGE, prompt: "a kite [simulate:fail]", aspect_ratio: "1:1" });
    const text = await createJob(customer, { model: TEXT, prompt: "a haiku" });
    await allFinished(customer, [...done, failed, text]);
    const slow = await createJob(customer, { model: IMAGE, prompt: "a kite [simulate:slow]", aspect_ratio: "1:1" });
    await eventually(() => call(service, "GET", `/api/v1/jobs/${slow}`, { key: customer.apiKey }), (r) => r.json.status === "processing", {
      what: "the slow job to be processing",
    });

    const ids = async (query: string) => (await listAll(customer, Object.fromEntries(new URLSearchParams(query)))).flat().map((job) => job.job_id);
    assert.deepEqual(new Set(await ids("status=done")), new Set([...done, text]));
    assert.deepEqual(await ids("status=failed"), [failed]);
    assert.deepEqual(await ids("status=processing"), [slow]);
    assert.deepEqual(await ids("status=queued"), []);
    assert.deepEqual(await ids(`model=${TEXT}`), [text]);
    assert.deepEqual(new Set(await ids(`model=${IMAGE}&status=done`)), new Set(done));
    // A "-preview" alias names its model.
    assert.deepEqual(await ids(`model=aimodel-3-pro-image-preview`), []);

    const all = (await list(customer)).jobs;
    assertNewestFirst(all);
    assert.equal(all.length, 5);
    // Strict bounds: after the oldest and before the newest leaves the three in between.
    const [newest, oldest] = [all[0]!, all[all.length - 1]!];
    const between = all.filter((job) => job.created_at > oldest.created_at && job.created_at < newest.created_at).map((job) => job.job_id);
    assert.deepEqual(await ids(`created_after=${oldest.created_at}&created_before=${newest.created_at}`), between);
    assert.deepEqual(await ids(`created_after=${newest.created_at}`), all.filter((job) => job.created_at > newest.created_at).map((job) => job.job_id));
    assert.deepEqual(
      await ids(`created_before=${oldest.created_at}&created_after=2000-01-01T00:00:00Z`),
      all.filter((job) => job.created_at < oldest.created_at).map((job) => job.job_id),
    );
    assert.equal((await ids("created_after=2000-01-01T00:00:00Z&created_before=2999-01-01T00:00:00Z")).length, 5);
  });

  it("when limit is absent, 1 or 100, then pages hold 20, 1 or up to 100 jobs and next_page_token says whether more follow", async () => {
    const customer = await createCustomer(service, "50.00");
    const ids = await Promise.all(Array.from({ length: 25 }, () => createJob(customer)));

    const first = await list(customer);
    assert.equal(first.jobs.length, 20);
    assert.equal(typeof first.next_page_token, "string");
    const rest = await list(customer, `?page_token=${encodeURIComponent(first.next_page_token!)}`);
    assert.equal(rest.jobs.length, 5);
    assert.equal(rest.next_page_token, null);

    const one = await list(customer, "?limit=1");
    assert.equal(one.jobs.length, 1);
    assert.equal(one.jobs[0]!.job_id, first.jobs[0]!.job_id);
    assert.notEqual(one.next_page_token, null);

    const hundred = await list(customer, "?limit=100");
    assert.deepEqual(new Set(hundred.jobs.map((job) => job.job_id)), new Set(ids));
    assert.equal(hundred.next_page_token, null);
    assert.deepEqual([...first.jobs, ...rest.jobs].map((job) => job.job_id), hundred.jobs.map((job) => job.job_id));

    const exact = await list(customer, "?limit=25");
    assert.equal(exact.jobs.length, 25);
    assert.equal(exact.next_page_token, null, "a page that ends with the last job has no next page");
  });

  it("when jobs are created while a client pages through, then every job that existed is listed exactly once, newest first", async () => {
    const customer = await createCustomer(service, "50.00");
    const existing = new Set<string>();
    for (let i = 0; i < 30; i++) existing.add(await createJob(customer));

    const created: string[] = [];
    let paging = true;
    const creator = (async () => {
      while (paging && created.length < 40) created.push(await createJob(customer));
    })();
    let pages: JobJson[][];
    try {
      pages = await listAll(customer, { limit: "3" });
    } finally {
      paging = false;
      await creator;
    }
    const listed = pages.flat();
    const ids = listed.map((job) => job.job_id);
    assert.equal(new Set(ids).size, ids.length, "no job is listed twice");
    for (const id of existing) assert.ok(ids.includes(id), `job ${id} existed before paging began and must be listed`);
    assertNewestFirst(listed);
    assert.ok(created.length > 0, "jobs were created while paging");
    assert.ok(pages.length >= 10, `${pages.length} pages of 3`);
  });

  it("when two accounts have jobs, then each lists only its own, and a page token of one is refused for the other", async () => {
    const [alice, bob] = [await createCustomer(service), await createCustomer(service)];
    const alices = [await createJob(alice), await createJob(alice)];
    const bobs = [await createJob(bob), await createJob(bob), await createJob(bob)];

    const aliceIds = (await listAll(alice)).flat().map((job) => job.job_id);
    const bobIds = (await listAll(bob)).flat().map((job) => job.job_id);
    assert.deepEqual(new Set(aliceIds), new Set(alices));
    assert.deepEqual(new Set(bobIds), new Set(bobs));

    const bobsToken = (await list(bob, "?limit=1")).next_page_token!;
    const refused = await call(service, "GET", `/api/v1/jobs?limit=1&page_token=${encodeURIComponent(bobsToken)}`, { key: alice.apiKey });
    assertPlatformError(refused, 400, "invalid_page_token");
  });

  it("when the query is malformed or out of range, then it is 400 with its own code and nothing changes", async () => {
    const customer = await createCustomer(service, "10.00");
    const ids = [await createJob(customer), await createJob(customer), await createJob(customer)];
    await allFinished(customer, ids);
    const balance = await balanceOf(service, customer.apiKey);
    const listing = (await listAll(customer)).flat().map(comparable);
    const token = (await list(customer, "?limit=1")).next_page_token!;
    // Every character of the token's signature changed in turn would be slow; the first, the last, and one of the payload are enough.
    const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === "A" ? "B" : "A") + text.slice(at + 1);

    const cases: [string, string][] = [
      ["?limit=0", "invalid_limit"],
      ["?limit=101", "invalid_limit"],
      ["?limit=-1", "invalid_limit"],
      ["?limit=abc", "invalid_limit"],
      ["?limit=2.5", "invalid_limit"],
      ["?limit=", "invalid_limit"],
      ["?limit=99999999999", "invalid_limit"],
      ["?status=finished", "invalid_status"],
      ["?status=DONE", "invalid_status"],
      ["?model=no-such-model", "invalid_model"],
      ["?created_after=yesterday", "invalid_timestamp"],
      ["?created_after=", "invalid_timestamp"],
      ["?created_before=2026-13-01T00:00:00Z", "invalid_timestamp"],
      ["?created_after=2026-02-01T00:00:00Z&created_before=2026-01-01T00:00:00Z", "invalid_time_range"],
      ["?page_token=garbage", "invalid_page_token"],
      ["?page_token=a.b", "invalid_page_token"],
      [`?page_token=${encodeURIComponent(flip(token, 0))}`, "invalid_page_token"],
      [`?page_token=${encodeURIComponent(flip(token, token.length - 1))}`, "invalid_page_token"],
      [`?page_token=${encodeURIComponent(token + "A")}`, "invalid_page_token"],
      [`?page_token=${encodeURIComponent("x".repeat(10_000))}`, "invalid_page_token"],
      // A token is valid only with the filters it was issued for.
      [`?status=done&limit=1&page_token=${encodeURIComponent(token)}`, "invalid_page_token"],
      ["?limit=1&limit=2", "invalid_query"],
    ];
    for (const [query, code] of cases) {
      const response = await call(service, "GET", `/api/v1/jobs${query}`, { key: customer.apiKey });
      assertPlatformError(response, 400, code);
      assert.equal(typeof response.json.error.message, "string", query);
    }
    // The same token with its own query still works: a refusal changed nothing.
    assert.equal((await list(customer, `?limit=1&page_token=${encodeURIComponent(token)}`)).jobs.length, 1);
    assert.deepEqual(await balanceOf(service, customer.apiKey), balance);
    assert.deepEqual((await listAll(customer)).flat().map(comparable), listing);
  });

  it("when no key or a wrong key is sent, then it is 401", async () => {
    assertPlatformError(await call(service, "GET", "/api/v1/jobs"), 401, "missing_api_key");
    assertPlatformError(await call(service, "GET", "/api/v1/jobs?limit=0", { key: "sk_not_a_real_key" }), 401, "invalid_api_key");
  });
});

describe("listing jobs over RPC (ListJobs)", () => {
  it("when ListJobs is called with a Connect client on the core port, then it pages through the same jobs as REST", async () => {
    const customer = await createCustomer(service, "10.00");
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await createJob(customer));
    await allFinished(customer, ids);
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const headers = { authorization: `Bearer ${customer.apiKey}` };

    const rpcPages: { id: string; status: JobStatus; model: string; createdAt: string }[][] = [];
    let pageToken = "";
    do {
      const response = await client.listJobs({ limit: 3, pageToken }, { headers });
      rpcPages.push(response.jobs.map((job) => ({ id: job.jobId, status: job.status, model: job.model, createdAt: timestampDate(job.createdAt!).toISOString() })));
      pageToken = response.nextPageToken;
    } while (pageToken !== "");
    const restPages = await listAll(customer, { limit: "3" });
    assert.deepEqual(
      rpcPages.map((page) => page.map((job) => [job.id, job.status === JobStatus.DONE ? "done" : String(job.status), job.model, job.createdAt])),
      restPages.map((page) => page.map((job) => [job.job_id, job.status, job.model, job.created_at])),
    );
    assert.deepEqual(rpcPages.map((page) => page.length), [3, 3, 1]);

    const filtered = await client.listJobs(
      { status: JobStatus.DONE, model: IMAGE, createdAfter: timestampFromDate(new Date("2000-01-01T00:00:00Z")) },
      { headers },
    );
    assert.deepEqual(new Set(filtered.jobs.map((job) => job.jobId)), new Set(ids));
    assert.equal(filtered.nextPageToken, "");
    assert.deepEqual((await client.listJobs({ status: JobStatus.FAILED }, { headers })).jobs, []);
  });

  it("when ListJobs gets a bad limit, status or token, then it is INVALID_ARGUMENT with the reason and HTTP status of REST", async () => {
    const customer = await createCustomer(service);
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const headers = { authorization: `Bearer ${customer.apiKey}` };
    const cases: [Parameters<typeof client.listJobs>[0], string][] = [
      [{ limit: 0 }, "invalid_limit"],
      [{ limit: 101 }, "invalid_limit"],
      [{ status: 99 as JobStatus }, "invalid_status"],
      [{ model: "nope" }, "invalid_model"],
      [{ createdAfter: timestampFromDate(new Date(2000)), createdBefore: timestampFromDate(new Date(1000)) }, "invalid_time_range"],
      [{ pageToken: "forged.token" }, "invalid_page_token"],
    ];
    for (const [request, reason] of cases) {
      const error = await client.listJobs(request, { headers }).then(
        () => assert.fail(`${JSON.stringify(request)} must fail`),
        (failure: unknown) => ConnectError.from(failure),
      );
      assert.equal(error.code, Code.InvalidArgument, reason);
      const [detail] = error.findDetails(ErrorDetailSchema);
      assert.equal(detail?.reason, reason);
      assert.equal(detail?.httpStatus, 400);
    }
  });
});

// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../gen/generation/v1/job_pb.js";
import { type FunctionCall, TextService } from "../../gen/generation/v1/text_service_pb.js";
import { ADMIN_TOKEN, balanceOf, createCustomer, eventually, pico, startTestService, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { FLASH } from "../support/vendor-sdk-helpers.js";
import { tokenCharge } from "../support/vendor-helpers.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

describe("core over gRPC with a plain @grpc/grpc-js client", () => {
  let service: TestService;
  let admin: grpc.Client;
  let generation: grpc.Client;
  let text: grpc.Client;

  before(async () => {
    service = await startTestService();
    const pkg = loadGrpcPackage();
    const address = grpcAddress(service.grpcUrl);
    const credentials = grpc.credentials.createInsecure();
    admin = new pkg.AdminService!(address, credentials);
    generation = new pkg.GenerationService!(address, credentials);
    text = new pkg.TextService!(address, credentials);
  });
  after(async () => {
    for (const client of [admin, generation, text]) client?.close();
    await service.close();
  });

  /** An account and a key made through AdminService over gRPC. */
  async function customer(balance: string) {
    const account = await unary(admin, "CreateAccount", { name: "grpc", balance }, bearer(ADMIN_TOKEN));
    const key = await unary(admin, "CreateApiKey", { accountId: account.accountId, models: ["*"] }, bearer(ADMIN_TOKEN));
    return { accountId: account.accountId as string, apiKey: key.apiKey as string, account, key };
  }

  it("creates an account and a key through AdminService", async () => {
    const { account, key } = await customer("10.00");
    assert.equal(typeof account.accountId, "string");
    assert.ok(account.accountId.length > 0);
    assert.deepEqual(account.balance, { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" });
    assert.equal(key.accountId, account.accountId);
    assert.deepEqual(key.models, ["*"]);
    assert.ok(key.apiKey.length > 0 && key.keyId.length > 0);
  });

  it("creates an image job, polls GetJob to JOB_STATUS_DONE and reads the charged balance", async () => {
    const { apiKey } = await customer("1.00");
    const created = await unary(generation, "CreateGeneration", {
      model: "aimodel-2.5-flash-image", prompt: "a lighthouse at night", aspectRatio: "1:1",
    }, bearer(apiKey));
    assert.match(created.jobId, UUID);
    assert.equal(created.status, "JOB_STATUS_QUEUED");
    assert.equal(created.statusUrl, `/api/v1/jobs/${created.jobId}`);

    const { job } = await eventually(
      () => unary(generation, "GetJob", { jobId: created.jobId }, bearer(apiKey)),
      (r: any) => r.job.status === "JOB_STATUS_DONE" || r.job.status === "JOB_STATUS_FAILED",
      { what: "job to finish over gRPC" },
    );
    assert.equal(job.status, "JOB_STATUS_DONE", JSON.stringify(job));
    assert.equal(job.jobId, created.jobId);
    assert.equal(job.model, "aimodel-2.5-flash-image");
    assert.match(job.result.imageUrl, /^http:\/\/.+\/files\/.+signature=/);
    assert.equal(job.result.mimeType, "image/png");
    const image = await fetch(job.result.imageUrl);
    assert.equal(image.status, 200);
    assert.equal(image.headers.get("content-type"), "image/png");

    const { balance } = await unary(generation, "GetBalance", {}, bearer(apiKey));
    assert.deepEqual(balance, { balance: "0.961", reserved: "0.00", available: "0.961", currency: "USD" });
  });

  it("lists the 14 models with kinds and prices, without a key", async () => {
    const response = await unary(generation, "ListModels", {});
    assert.equal(response.models.length, 14);
    const byId = new Map<string, any>(response.models.map((m: { id: string }) => [m.id, m]));
    assert.equal(byId.get("aimodel-3-pro-image").kind, "MODEL_KIND_IMAGE");
    assert.equal(byId.get("aimodel-3.5-flash").kind, "MODEL_KIND_TEXT");
    assert.equal(byId.get("videomodel-3.1-generate-001").kind, "MODEL_KIND_VIDEO");
    assert.equal(byId.get("aimodel-omni-1.1-flash").kind, "MODEL_KIND_MULTIMODAL_REALTIME");
    assert.equal(byId.get("aimodel-3.5-flash").price.outputPerMillionTokens, "2.50");
    assert.ok(response.aspectRatios.includes("auto"));
  });

  it("refuses a call without a key with UNAUTHENTICATED and an ErrorDetail in grpc-status-details-bin", async () => {
    const error = await rpcError(unary(generation, "GetBalance", {}));
    assert.equal(error.code, grpc.status.UNAUTHENTICATED);
    assert.equal(error.code, 16);
    const status = errorDetailOf(error);
    assert.equal(status.code, 16);
    assert.equal(status.details.length, 1, `ErrorDetail among ${status.typeUrls}`);
    assert.equal(status.details[0]!.reason, "missing_api_key");
    assert.equal(status.details[0]!.httpStatus, 401);

    const wrongAdmin = await rpcError(unary(admin, "CreateAccount", { name: "x", balance: "1.00" }, bearer("not-the-admin-token")));
    assert.equal(wrongAdmin.code, grpc.status.UNAUTHENTICATED);
  });

  it("refuses a job the balance cannot cover with FAILED_PRECONDITION and reason insufficient_funds", async () => {
    const { apiKey } = await customer("0.01");
    const error = await rpcError(unary(generation, "CreateGeneration", {
      model: "aimodel-3-pro-image", prompt: "a fox", aspectRatio: "16:9", resolution: "1K",
    }, bearer(apiKey)));
    assert.equal(error.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(error.code, 9);
    assert.ok(error.details.length > 0, "a human-readable message");
    const status = errorDetailOf(error);
    assert.equal(status.details[0]!.reason, "insufficient_funds");
    assert.equal(status.details[0]!.httpStatus, 402);
    const { balance } = await unary(generation, "GetBalance", {}, bearer(apiKey));
    assert.deepEqual(balance, { balance: "0.01", reserved: "0.00", available: "0.01", currency: "USD" });
  });

  it("streams StreamGenerateContent as several chunks, the last with finish reason and usage", async () => {
    const { apiKey } = await customer("1.00");
    const prompt = "describe a harbour at dawn";
    const metadata = new grpc.Metadata();
    metadata.set("x-vendor-api-key", apiKey);
    const stream: grpc.ClientReadableStream<any> = (text as any).StreamGenerateContent({ request: { model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ text: prompt }] }] } }, metadata);
    const chunks: any[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on("data", (message: any) => chunks.push(message.chunk));
      stream.on("error", reject);
      stream.on("end", () => resolve());
    });
    assert.ok(chunks.length >= 3, `several chunks, got ${chunks.length}`);
    for (const chunk of chunks) assert.equal(chunk.candidates[0].content.role, "model");
    const last = chunks.at(-1);
    assert.equal(last.candidates[0].finishReason, "STOP");
    const usage = last.usageMetadata;
    assert.equal(usage.promptTokenCount, Math.ceil(Buffer.byteLength(prompt) / 4));
    assert.ok(usage.candidatesTokenCount > chunks[0].usageMetadata.candidatesTokenCount);
    assert.equal(usage.totalTokenCount, usage.promptTokenCount + usage.candidatesTokenCount);
    const answer = chunks.map((c) => c.candidates[0].content.parts.map((p: { text: string }) => p.text).join("")).join("");
    assert.equal(Math.ceil(Buffer.byteLength(answer) / 4), usage.candidatesTokenCount);
  });
});

describe("core over gRPC with a Connect client (createGrpcTransport)", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service.close());

  it("creates and reads a job and maps errors to ConnectError with the ErrorDetail", async () => {
    const transport = createGrpcTransport({ baseUrl: service.grpcUrl });
    const client = createClient(GenerationService, transport);
    const listed = await client.listModels({});
    assert.equal(listed.models.length, 14);

    const pkg = loadGrpcPackage();
    const admin = new pkg.AdminService!(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      const account = await unary(admin, "CreateAccount", { name: "connect", balance: "1.00" }, bearer(ADMIN_TOKEN));
      const key = await unary(admin, "CreateApiKey", { accountId: account.accountId, models: ["*"] }, bearer(ADMIN_TOKEN));
      const headers = { authorization: `Bearer ${key.apiKey}` };

      const created = await client.createGeneration({ model: "aimodel-2.5-flash-image", prompt: "a kite", aspectRatio: "1:1" }, { headers });
      assert.match(created.jobId, UUID);
      const done = await eventually(
        () => client.getJob({ jobId: created.jobId }, { headers }),
        (r) => r.job!.status === JobStatus.DONE || r.job!.status === JobStatus.FAILED,
        { what: "job to finish over Connect" },
      );
      assert.equal(done.job!.status, JobStatus.DONE);
      const { balance } = await client.getBalance({}, { headers });
      assert.equal(balance!.balance, "0.961");

      const error = await client.getJob({ jobId: "00000000-0000-4000-8000-000000000000" }, { headers }).then(
        () => assert.fail("an unknown job must fail"),
        (e: unknown) => ConnectError.from(e),
      );
      assert.equal(error.code, Code.NotFound);
      const [detail] = error.findDetails(ErrorDetailSchema);
      assert.equal(detail?.httpStatus, 404);
      assert.equal(detail?.reason, "job_not_found");
    } finally {
      admin.close();
    }
  });

  it("when TextService is called with function declarations, then the function call and the caller's response travel typed, and both calls are charged their usage", async () => {
    const client = createClient(TextService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const customer = await createCustomer(service, "1.00");
    const headers = { "x-vendor-api-key": customer.apiKey };
    const tools = [{ functionDeclarations: [{ name: "find_book", parameters: { type: "OBJECT", properties: { isbn: { type: "STRING" } }, required: ["isbn"] } }] }];
    const question = { role: "user", parts: [{ data: { case: "text" as const, value: "Find my book [simulate:function]" } }] };
    const first = await client.generateContent({ model: "aimodel-3.5-flash", contents: [question], tools }, { headers });
    const part = first.candidates[0]!.content!.parts[0]!;
    assert.equal(part.data.case, "functionCall");
    const call = part.data.value as FunctionCall;
    assert.deepEqual([call.name, call.args], ["find_book", { isbn: "" }]);
    const response = { role: "user", parts: [{ data: { case: "functionResponse" as const, value: { id: call.id, name: call.name, response: { title: "Dune" } } } }] };
    const second = await client.generateContent({ model: "aimodel-3.5-flash", contents: [question, first.candidates[0]!.content!, response], tools }, { headers });
    assert.equal(second.candidates[0]!.content!.parts[0]!.data.case, "text");
    await eventually(() => balanceOf(service, customer.apiKey), (b) => b.reserved === "0.00", { what: "the holds to end" });
    const charged = (await allEntries(service, { key: customer.apiKey })).filter((e) => e.type === "charge").reverse().map((e) => -pico(e.amount));
    const cost = (usage: typeof first.usageMetadata) => tokenCharge(FLASH, usage!.promptTokenCount!, usage!.candidatesTokenCount!);
    assert.deepEqual(charged, [cost(first.usageMetadata), cost(second.usageMetadata)]);
  });
});

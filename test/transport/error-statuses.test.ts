// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { DomainError, PROVIDER_FAILURES, toConnectError } from "../../src/core/index.js";
import { httpErrorOf } from "../../src/transport/http/error-replies.js";
import {
  bodyMemoryFull, invalidMessageFlags, malformedMessage, messageTooLarge, requestTimedOut, tooManyUploads, withHttpStatus,
} from "../../src/transport/rpc/refusals.js";
import { createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";

type Category = DomainError["category"];

/**
 * Every (category, reason) the domain, the core and the RPC edge refuse with
 * (read from their DomainError constructions), and the REST status each had
 * when the core still chose it (its category's): the edge's table must give
 * the same.
 */
const REASONS: Record<Category, { readonly status: number; readonly reasons: readonly string[] }> = {
  invalid: {
    status: 422,
    reasons: [
      "balance_limit_exceeded", "idempotency_key_reused", "input_images_not_allowed", "input_too_large", "invalid_amount",
      "invalid_callback_url", "invalid_candidate_count", "invalid_contents", "invalid_duration", "invalid_grants",
      "invalid_idempotency_key", "invalid_input_image", "invalid_input_image_url", "invalid_instances", "invalid_max_output_tokens",
      "invalid_metadata", "invalid_price", "invalid_prompt", "invalid_timeout", "invalid_url", "metadata_too_large",
      "missing_aspect_ratio", "missing_input_image_urls", "missing_model", "missing_resolution", "model_mismatch", "prompt_too_long",
      "too_many_input_images", "unknown_model", "unsupported_aspect_ratio", "unsupported_model", "unsupported_resolution",
      "webhook_url_not_set",
    ],
  },
  bad_request: {
    status: 400,
    reasons: [
      "field_too_long", "invalid_group_by", "invalid_key_limit", "invalid_limit", "invalid_model", "invalid_page_size",
      "invalid_page_token", "invalid_status", "invalid_time_range", "invalid_wait", "malformed_message", "unsupported_field",
      "unsupported_media_type", "video_duration_requires_8s",
    ],
  },
  unauthenticated: {
    status: 401,
    reasons: [
      "csrf_token_mismatch", "inactive_account", "invalid_admin_token", "invalid_api_key", "invalid_owner_token", "invalid_session",
      "missing_api_key", "missing_credential", "session_expired", "session_revoked",
    ],
  },
  permission_denied: {
    status: 403,
    reasons: ["link_bad_signature", "link_expired", "model_not_permitted", "operator_session_required", "owner_credential_required"],
  },
  not_found: {
    status: 404,
    reasons: [
      "account_not_found", "file_not_found", "job_not_found", "key_not_found", "panel_session_not_found", "route_not_found",
      "unknown_model", "webhook_delivery_not_found",
    ],
  },
  insufficient_funds: { status: 402, reasons: ["insufficient_funds", "key_spend_limit_exceeded"] },
  conflict: { status: 409, reasons: ["idempotency_key_in_use"] },
  already_finished: { status: 409, reasons: ["job_already_finished"] },
  rate_limited: {
    status: 429,
    reasons: ["key_concurrency_limit_exceeded", "key_rate_limit_exceeded", "too_many_failed_credentials", "too_many_queued_jobs", "too_many_uploads"],
  },
  unavailable: { status: 503, reasons: ["model_paused", "price_not_configured", "project_paused", "server_busy", "service_unavailable"] },
  // A text call's provider failure carries the provider's code as its reason.
  upstream_failure: { status: 502, reasons: ["upstream_storage_failure", ...PROVIDER_FAILURES] },
  internal: { status: 500, reasons: [] },
};

const EVERY_REASON = Object.entries(REASONS).flatMap(([category, { status, reasons }]) =>
  reasons.map((reason) => ({ category: category as Category, reason, status })),
);

/** The failure as a remote core's Connect client receives it: thrown by a handler, its detail read back as bytes off the wire. */
async function overTheWire(error: ConnectError): Promise<ConnectError> {
  const transport = createRouterTransport(({ service }) => service(GenerationService, { getJob: () => { throw error; } }));
  const received = await createClient(GenerationService, transport).getJob({ jobId: "j" }).then(() => undefined, (e: unknown) => e);
  assert.ok(received instanceof ConnectError, "the call was refused");
  return received;
}

const detailOf = (error: ConnectError) => error.findDetails(ErrorDetailSchema)[0];

describe("errors decided once: the core answers a code and a reason, the REST edge's table the status", () => {
  it("when the core refuses with any reason it has, then REST answers the status it answered when the core chose it", () => {
    const wrong = EVERY_REASON.flatMap(({ category, reason, status }) => {
      const answered = httpErrorOf(toConnectError(new DomainError(category, reason, "refused"))).status;
      return answered === status ? [] : [`${category}/${reason}: ${answered}, was ${status}`];
    });
    assert.deepEqual(wrong, []);
  });

  it("when the core refuses, then its ErrorDetail has a reason and no HTTP status of the core's choosing", () => {
    for (const { category, reason } of EVERY_REASON) {
      const detail = detailOf(toConnectError(new DomainError(category, reason, "refused", {}, 3)));
      assert.equal(detail?.reason, reason);
      assert.equal(detail?.retryAfterSeconds, 3);
      assert.equal(detail?.httpStatus, 0, `${category}/${reason}`);
    }
  });

  it("when a gateway reads a remote core's refusal off the wire, then it answers the same status as in process", async () => {
    for (const { category, reason, status } of EVERY_REASON) {
      const received = await overTheWire(toConnectError(new DomainError(category, reason, "refused")));
      assert.equal(httpErrorOf(received).status, status, `${category}/${reason}`);
    }
  });

  it("when a refusal leaves an RPC port, then its deprecated http_status is REST's status, whether made in process or received", async () => {
    for (const { category, reason, status } of EVERY_REASON) {
      const inProcess = withHttpStatus(toConnectError(new DomainError(category, reason, "refused")));
      const received = withHttpStatus(await overTheWire(toConnectError(new DomainError(category, reason, "refused"))));
      assert.equal(detailOf(inProcess)?.httpStatus, status, `${category}/${reason} in process`);
      assert.equal(detailOf(await overTheWire(received))?.httpStatus, status, `${category}/${reason} received`);
      assert.equal(detailOf(received)?.reason, reason);
    }
  });

  it("when the RPC edge refuses a call itself, then REST's status and the detail's http_status are the edge's documented ones", () => {
    const cases: [ConnectError, number][] = [
      [requestTimedOut(1000), 408],
      [invalidMessageFlags(2, undefined), 400],
      [messageTooLarge("M", 10, 11), 422],
      [malformedMessage("M"), 400],
      [tooManyUploads(1), 429],
      [bodyMemoryFull(1), 503],
    ];
    for (const [refusal, status] of cases) {
      const reason = detailOf(refusal)?.reason;
      assert.equal(httpErrorOf(refusal).status, status, reason);
      assert.equal(detailOf(refusal)?.httpStatus, status, reason);
    }
  });

  it("when an error carries no ErrorDetail, then REST answers its code's status, and a 5xx as internal_error", () => {
    const cases: [Code, number][] = [
      [Code.InvalidArgument, 422], [Code.FailedPrecondition, 422], [Code.Unavailable, 503], [Code.DeadlineExceeded, 504],
      [Code.Canceled, 499], [Code.Unimplemented, 501], [Code.Internal, 500], [Code.Unknown, 500],
    ];
    for (const [code, status] of cases) assert.equal(httpErrorOf(new ConnectError("m", code)).status, status, Code[code]);
    assert.equal(httpErrorOf(new ConnectError("m", Code.Internal)).reason, "internal_error");
    assert.equal(withHttpStatus(new ConnectError("m", Code.Internal)).details.length, 0);
  });
});

describe("the deprecated http_status on the RPC ports", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "1.00");
  });
  after(async () => {
    await service?.close();
  });

  it("when a server stream fails (WatchJob of an unknown job) on either port, then its ErrorDetail carries REST's 404", async () => {
    const ports: [string, Transport][] = [
      ["core port, gRPC", createGrpcTransport({ baseUrl: service.grpcUrl })],
      ["gateway port, Connect", createConnectTransport({ baseUrl: service.url, httpVersion: "1.1" })],
    ];
    for (const [port, transport] of ports) {
      const client = createClient(GenerationService, transport);
      const failure = await (async () => {
        for await (const _ of client.watchJob({ jobId: "00000000-0000-4000-8000-000000000000" }, { headers: { authorization: `Bearer ${customer.apiKey}` } })) {
          assert.fail(`${port}: an unknown job sent an event`);
        }
      })().then(() => assert.fail(`${port}: an unknown job's watch must fail`), (error: unknown) => ConnectError.from(error));
      assert.equal(failure.code, Code.NotFound, port);
      const detail = detailOf(failure);
      assert.equal(detail?.reason, "job_not_found", port);
      assert.equal(detail?.httpStatus, 404, port);
    }
  });
});

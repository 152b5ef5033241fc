// backends: embedded
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { createLogger } from "../../src/runtime/logger.js";

/** The service's own logger, its lines kept as parsed JSON. */
function capture(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger("info", "api", sink), lines };
}

describe("the log's secret net", () => {
  it("when a line's facts hold a credential at the top, one level down or in request headers, then it is written censored", () => {
    const { logger, lines } = capture();
    const facts = {
      key: "sk-top", authorization: "Bearer top",
      route: { name: "primary", apiKey: "vendor-key", headers: { "x-vendor-api-key": "vk" } },
      headers: { "x-goog-api-key": "gk", cookie: "session=1", accept: "text/plain" },
      req: { method: "POST", headers: { authorization: "Bearer nested", "x-admin-token": "admin" } },
    };
    logger.info(facts, "a line");
    const [line] = lines;
    assert.equal(line!.key, "[redacted]");
    assert.equal(line!.authorization, "[redacted]");
    assert.deepEqual(line!.route, { name: "primary", apiKey: "[redacted]", headers: { "x-vendor-api-key": "[redacted]" } });
    assert.deepEqual(line!.headers, { "x-goog-api-key": "[redacted]", cookie: "[redacted]", accept: "text/plain" });
    assert.deepEqual(line!.req, { method: "POST", headers: { authorization: "[redacted]", "x-admin-token": "[redacted]" } });
    assert.equal(facts.key, "sk-top", "the caller's object is not changed");
    assert.equal(facts.req.headers.authorization, "Bearer nested");
  });

  it("when a child logger is bound to a secret, then its lines carry it censored", () => {
    const { logger, lines } = capture();
    logger.child({ token: "owner-token", request_id: "r1" }).info("bound");
    assert.equal(lines[0]!.token, "[redacted]");
    assert.equal(lines[0]!.request_id, "r1");
  });

  it("when a line holds no secret, then every fact is written as given", () => {
    const { logger, lines } = capture();
    logger.info({ res: { statusCode: 200 }, responseTime: 1.5, request_id: "r2" }, "request completed");
    assert.deepEqual(lines[0]!.res, { statusCode: 200 });
    assert.equal(lines[0]!.responseTime, 1.5);
    assert.equal(lines[0]!.msg, "request completed");
    assert.equal(lines[0]!.role, "api");
  });
});

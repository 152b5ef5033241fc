// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import pino from "pino";
import type { FastifyBaseLogger } from "fastify";
import { requestLoggerFactory } from "../../src/transport/http/edge/request-logger.js";

/** A pino logger at `level` writing its lines (parsed) into `lines`, counting the children made of it. */
function parentAt(level: string) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const logger = pino({ level }, sink);
  let children = 0;
  const child = logger.child;
  // Children inherit this from the parent (pino makes them with Object.create): each made is counted.
  (logger as { child: unknown }).child = function (this: typeof logger, ...args: Parameters<typeof child>) {
    children++;
    return child.apply(this, args);
  };
  return { logger: logger as unknown as FastifyBaseLogger, lines, children: () => children };
}

const flushed = () => new Promise((resolve) => setImmediate(resolve));

describe("a request's logger", () => {
  it("when a request logs only below the level, then no child logger is made and nothing is written", async () => {
    const parent = parentAt("warn");
    const log = requestLoggerFactory(parent.logger, { request_id: "r-1" }, {});
    log.debug("incoming request");
    log.info("request completed");
    await flushed();
    assert.equal(parent.children(), 0);
    assert.deepEqual(parent.lines, []);
    assert.equal(log.level, "warn");
  });

  it("when a request logs at an enabled level, then the line carries the request's bindings, and later lines share one child", async () => {
    const parent = parentAt("info");
    const log = requestLoggerFactory(parent.logger, { request_id: "r-2" }, {});
    log.info({ status: 200 }, "request completed");
    log.error("second");
    log.debug("dropped");
    await flushed();
    assert.equal(parent.children(), 1);
    assert.deepEqual(parent.lines.map((line) => [line.request_id, line.msg, line.status]), [["r-2", "request completed", 200], ["r-2", "second", undefined]]);
  });

  it("when a child is asked of it (a trace id), then its lines carry both bindings", async () => {
    const parent = parentAt("info");
    const log = requestLoggerFactory(parent.logger, { request_id: "r-3" }, {}).child({ trace_id: "t-1" });
    log.warn("traced");
    await flushed();
    assert.deepEqual(parent.lines.map((line) => [line.request_id, line.trace_id, line.msg]), [["r-3", "t-1", "traced"]]);
  });

  it("when a route sets its own level, then pino's child is made at once with it", async () => {
    const parent = parentAt("warn");
    const log = requestLoggerFactory(parent.logger, { request_id: "r-4" }, { level: "debug" });
    assert.equal(parent.children(), 1);
    log.debug("route debug");
    await flushed();
    assert.deepEqual(parent.lines.map((line) => [line.request_id, line.msg]), [["r-4", "route debug"]]);
  });
});

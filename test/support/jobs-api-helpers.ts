import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { PNG } from "pngjs";
import { balanceOf, call, type ApiResponse, type TestService } from "./harness.js";

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const FRESH_BALANCE = { balance: "10.00", reserved: "0.00", available: "10.00", currency: "USD" } as const;

export function postGeneration(service: TestService, key: string, body: unknown, headers: Record<string, string> = {}) {
  return call(service, "POST", "/api/v1/generations", { key, body, headers });
}

/** The platform error shape of /api/v1 and /files: {"error": {"code", "message"}}. */
export function assertPlatformError(response: ApiResponse, status: number, code: string): void {
  assert.equal(response.status, status, `expected ${status} ${code}, got ${response.status}: ${response.text}`);
  assert.equal(response.json?.error?.code, code, `expected code ${code}, got ${response.text}`);
  assert.equal(typeof response.json.error.message, "string");
  assert.ok(response.json.error.message.length > 0, "error message is empty");
}

/** The vendor error shape of /api/aimodel/v1beta. */
export function assertVendorError(response: ApiResponse, status: number, canonical: string, reason?: string): void {
  assert.equal(response.status, status, `expected ${status} ${canonical}, got ${response.status}: ${response.text}`);
  assert.equal(response.json?.error?.code, status, response.text);
  assert.equal(response.json.error.status, canonical, response.text);
  assert.equal(typeof response.json.error.message, "string");
  if (reason) {
    const info = (response.json.error.details ?? []).find((d: { "@type"?: string }) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo");
    assert.equal(info?.reason, reason, response.text);
  }
}

export async function assertBalance(service: TestService, key: string, expected: { balance: string; reserved: string; available: string }) {
  const now = await balanceOf(service, key);
  assert.deepEqual(
    { balance: now.balance, reserved: now.reserved, available: now.available },
    { balance: expected.balance, reserved: expected.reserved, available: expected.available },
  );
}

/** A small real PNG, for input images served or sent inline. */
export function tinyPng(width = 8, height = 8): Buffer {
  const png = new PNG({ width, height });
  for (let i = 0; i < png.data.length; i += 4) {
    png.data[i] = (i * 7) & 0xff;
    png.data[i + 1] = (i * 13) & 0xff;
    png.data[i + 2] = 200;
    png.data[i + 3] = 255;
  }
  return PNG.sync.write(png);
}

export interface LocalServer {
  readonly url: string;
  readonly hits: string[];
  close(): Promise<void>;
}

/** A loopback HTTP server on an ephemeral port that records the paths it was asked for. */
export async function startLocalServer(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<LocalServer> {
  const hits: string[] = [];
  const server = createServer((request, response) => {
    hits.push(request.url ?? "");
    handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A loopback URL on a port that was just released, so connecting to it is refused. */
export async function closedPortUrl(path = "/gone.png"): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}${path}`;
}

const LONG_SIDE: Record<string, number> = { "1K": 1024, "2K": 2048, "4K": 4096 };

/** The documented size rule: long side by resolution, the other side by ratio, rounded to an even number. */
export function expectedImageSize(aspectRatio: string, resolution: string): { width: number; height: number } {
  const long = LONG_SIDE[resolution]!;
  const [w, h] = aspectRatio === "auto" ? [1, 1] : aspectRatio.split(":").map(Number) as [number, number];
  const short = Math.round((long * Math.min(w, h)) / Math.max(w, h) / 2) * 2;
  return w >= h ? { width: long, height: short } : { width: short, height: long };
}

export async function download(url: string): Promise<{ status: number; contentType: string | null; bytes: Uint8Array; json: any }> {
  const response = await fetch(url);
  const bytes = new Uint8Array(await response.arrayBuffer());
  let json: any;
  if (response.headers.get("content-type")?.includes("json")) json = JSON.parse(Buffer.from(bytes).toString("utf8"));
  return { status: response.status, contentType: response.headers.get("content-type"), bytes, json };
}

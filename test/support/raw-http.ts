import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { eventually } from "./harness.js";

/**
 * Raw HTTP/1.1 exchanges for the edge tests: headers written at once, the
 * body only when the test says so, so a test controls exactly which bytes of
 * a body were sent before the gateway answered.
 */
export interface RawExchange {
  readonly socket: Socket;
  received: string;
  closed: boolean;
  /** Body bytes the client managed to write. */
  sent: number;
}

export async function openExchange(url: string, head: string): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  const exchange: RawExchange = { socket, received: "", closed: false, sent: 0 };
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => (exchange.received += chunk));
  socket.on("error", () => {});
  socket.on("close", () => (exchange.closed = true));
  await once(socket, "connect");
  socket.write(head);
  return exchange;
}

export const requestHead = (method: string, path: string, headers: Record<string, string | number>) =>
  `${method} ${path} HTTP/1.1\r\nHost: gateway\r\n` + Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") + "\r\n";

/** The final (non-1xx) answer of an exchange, once it has arrived. */
export function answerOf(exchange: RawExchange): { status: number; headers: string; json: any } | undefined {
  const responses = exchange.received.split(/(?=HTTP\/1\.1 \d{3} )/).filter((part) => !/^HTTP\/1\.1 1\d\d /.test(part));
  const last = responses.at(-1);
  if (!last) return undefined;
  const end = last.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const headers = last.slice(0, end);
  const length = Number(/\r\ncontent-length: (\d+)/i.exec(headers)?.[1] ?? -1);
  const body = last.slice(end + 4);
  if (length < 0 || Buffer.byteLength(body, "latin1") < length) return undefined;
  return { status: Number(last.slice(9, 12)), headers, json: JSON.parse(body.slice(0, length)) };
}

/** Waits (with a deadline) for the exchange's final answer. */
export async function answered(exchange: RawExchange, what: string, timeoutMs = 10_000) {
  return (await eventually(async () => answerOf(exchange), (answer) => answer !== undefined, { timeoutMs, what }))!;
}

/** Resolves once the socket can take more, or has closed. */
export function drainedOrClosed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off("drain", done);
      socket.off("close", done);
      resolve();
    };
    socket.on("drain", done);
    socket.on("close", done);
  });
}

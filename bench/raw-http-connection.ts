import { connect, type Socket } from "node:net";

const HEADER_END = Buffer.from("\r\n\r\n");

export interface RawReply {
  readonly status: number;
  readonly body: Buffer;
}

/**
 * One keep-alive HTTP/1.1 connection, one request at a time (no pipelining).
 * Cheaper per request than fetch or node:http, which matters when the load
 * generator shares two cores with the servers it measures.
 */
export class RawHttpConnection {
  private buffered: Buffer = Buffer.alloc(0);
  private waiting: { resolve: (reply: RawReply) => void; reject: (error: Error) => void } | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (error) => this.fail(error));
    socket.on("close", () => this.fail(new Error("connection closed by server")));
  }

  static open(host: string, port: number): Promise<RawHttpConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port, noDelay: true }, () => {
        socket.off("error", reject);
        resolve(new RawHttpConnection(socket));
      });
      socket.once("error", reject);
    });
  }

  /** Sends one request; with `timeoutMs`, a missing answer fails it and closes the connection. */
  request(bytes: Buffer, timeoutMs?: number): Promise<RawReply> {
    return new Promise((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.fail(new Error(`no answer within ${timeoutMs} ms`));
              this.socket.destroy();
            }, timeoutMs);
      this.waiting = {
        resolve: (reply) => { clearTimeout(timer); resolve(reply); },
        reject: (error) => { clearTimeout(timer); reject(error); },
      };
      this.socket.write(bytes);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const end = this.buffered.indexOf(HEADER_END);
    if (end < 0) return;
    const head = this.buffered.subarray(0, end).toString("latin1");
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (!length) {
      // Every route measured answers with a Content-Length; anything else is a finding, not something to parse around.
      this.fail(new Error(`response without content-length: ${head.split("\r\n")[0]}`));
      return;
    }
    const total = end + HEADER_END.length + Number(length[1]);
    if (this.buffered.length < total) return;
    const reply = { status: Number(head.slice(9, 12)), body: this.buffered.subarray(end + HEADER_END.length, total) };
    this.buffered = this.buffered.subarray(total);
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.resolve(reply);
  }

  private fail(error: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(error);
  }
}

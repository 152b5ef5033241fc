import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { isRefused } from "../../connection-limits.js";

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

/** One connection's requests: those being answered (at most the depth), and those parsed behind them, waiting. */
class Pipeline {
  /** The answers being produced, each with what runs once it is over. */
  private readonly active = new Map<ServerResponse, (() => void)[]>();
  private readonly waiting: [IncomingMessage, ServerResponse][] = [];
  private held = false;

  constructor(
    private readonly socket: Socket,
    private readonly depth: number,
    private readonly handler: RequestListener,
  ) {
    // Node resumes a paused socket on its own (on 'drain', when a request body is read): held, it is paused again.
    socket.on("resume", () => {
      if (this.held) socket.pause();
    });
    // A connection that dies has answers Node never closes (those queued behind the one being written): they end here.
    socket.once("close", () => {
      this.waiting.length = 0;
      this.held = false;
      for (const response of [...this.active.keys()]) this.end(response);
    });
  }

  arrive(request: IncomingMessage, response: ServerResponse): void {
    if (this.active.size < this.depth && this.waiting.length === 0) return this.start(request, response);
    this.waiting.push([request, response]);
    // One read can hold many pipelined requests (Node parses all of it at once): no further read until they are answered.
    if (!this.held) {
      this.held = true;
      this.socket.pause();
    }
  }

  /** The answer being written (the oldest one started), if any. */
  get current(): ServerResponse | undefined {
    return this.active.keys().next().value;
  }

  onEnd(response: ServerResponse, listener: () => void): boolean {
    const listeners = this.active.get(response);
    if (!listeners) return false;
    listeners.push(listener);
    return true;
  }

  private start(request: IncomingMessage, response: ServerResponse): void {
    this.active.set(response, []);
    response.once("close", () => this.end(response));
    this.handler(request, response);
  }

  private end(response: ServerResponse): void {
    const listeners = this.active.get(response);
    if (!listeners) return;
    this.active.delete(response);
    for (const listener of listeners) listener();
    if (this.socket.destroyed) return;
    while (this.active.size < this.depth && this.waiting.length > 0) this.start(...this.waiting.shift()!);
    if (this.held && this.waiting.length === 0) {
      this.held = false;
      // When Node paused the socket itself (its writes are not being read), its own 'resume' handler keeps it paused until 'drain'.
      this.socket.resume();
    }
  }
}

const pipelines = new WeakMap<Socket, Pipeline>();

/** At most `depth` of a connection's requests reach `handler` at once; while more wait it is not read (decision 0005). */
export function limitPipelining(depth: number, handler: RequestListener): RequestListener {
  return (request, response) => {
    const socket = request.socket;
    // A connection refused for its client's cap: what it still sends is read and dropped.
    if (isRefused(socket)) {
      request.resume();
      return;
    }
    const pipeline = pipelines.get(socket) ?? new Pipeline(socket, depth, handler);
    pipelines.set(socket, pipeline);
    pipeline.arrive(request, response);
  };
}

/** The answer a connection is writing (its oldest one started and not over), if any. */
export const answerInProgress = (socket: Socket): ServerResponse | undefined => pipelines.get(socket)?.current;

/** Calls `listener` once when the answer is over, also when its connection died (a queued answer never emits 'close'). */
export function onAnswerEnd(response: ServerResponse, listener: () => void): void {
  if (pipelines.get(response.req.socket)?.onEnd(response, listener)) return;
  if (response.closed || response.req.socket.destroyed) listener();
  else response.once("close", listener);
}

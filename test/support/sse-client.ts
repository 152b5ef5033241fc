/** A minimal Server-Sent Events reader over fetch, recording events and comment lines as they arrive. */

export interface SseEvent {
  readonly event?: string;
  readonly id?: string;
  readonly data: string;
}

export interface SseStream {
  readonly status: number;
  readonly headers: Headers;
  /** The body when the answer was not an event stream (an error's JSON). */
  readonly text?: string;
  readonly events: SseEvent[];
  /** Comment lines (": keep-alive") in arrival order. */
  readonly comments: string[];
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  /** Hangs up. */
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, events, comments, ended: Promise.resolve(), close: () => {} };
  }
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    let current: { event?: string; id?: string; data: string[] } = { data: [] };
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.search(/\r\n|\n|\r/)) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
          if (line === "") {
            if (current.data.length > 0 || current.event !== undefined) {
              events.push({ event: current.event, id: current.id, data: current.data.join("\n") });
            }
            current = { data: [] };
          } else if (line.startsWith(":")) {
            comments.push(line);
          } else {
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") current.event = value;
            else if (field === "id") current.id = value;
            else if (field === "data") current.data.push(value);
          }
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  })();
  return { status: response.status, headers: response.headers, events, comments, ended, close: () => controller.abort() };
}

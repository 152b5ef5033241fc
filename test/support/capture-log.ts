import { pino, type Logger } from "pino";

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** A pino logger like the service's own (runtime/logger.ts), whose JSON lines are kept here to be read by a test. */
export function captureLog(level = "debug"): { logger: Logger; lines: LogLine[]; messages(): string[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines, messages: () => lines.map((line) => line.msg) };
}

/** A logger that hands each line's message (and its facts, as JSON) to `push`: for tests that print what an adapter said. */
export function lineLogger(push: (line: string) => void): Logger {
  return pino({ level: "debug" }, {
    write: (text: string) => {
      const { level: _level, time: _time, pid: _pid, hostname: _hostname, msg, ...facts } = JSON.parse(text) as LogLine;
      push(Object.keys(facts).length > 0 ? `${msg} ${JSON.stringify(facts)}` : msg);
    },
  });
}

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino, type Logger } from "pino";

/**
 * LOG_CAPTURE_DIR (set by `npm run test:embedded` and `test:real`): every
 * service a test starts logs at debug into a file there, so that the whole
 * suite's traffic can be scanned for secrets afterwards (test/support/scan-logs.ts).
 * Without it, services log nothing unless TEST_LOG asks.
 */
const captureDir = process.env.LOG_CAPTURE_DIR;
let started = 0;

/** The logger of a service a test starts: into LOG_CAPTURE_DIR at debug, to stderr with TEST_LOG, otherwise silent. `flush` writes what is left and closes the file. */
export function testServiceLogger(): { logger: Logger; flush(): void } | undefined {
  if (captureDir) {
    mkdirSync(captureDir, { recursive: true });
    const destination = pino.destination({ dest: join(captureDir, `${process.pid}-${++started}.log`), sync: false });
    // A line logged after the service closed (a client's socket reset as the test ends) is dropped, not written
    // to the ended file: that write would throw inside whatever logged it.
    let ended = false;
    const logger = pino({ level: "debug" }, { write: (line: string) => void (ended || destination.write(line)) });
    return {
      logger,
      flush: () => {
        ended = true;
        destination.flushSync();
        destination.end(); // its descriptor is closed with the service
      },
    };
  }
  if (process.env.TEST_LOG) return { logger: pino({ level: "warn" }, pino.destination(2)), flush: () => {} };
  return undefined;
}

/** Keeps a spawned process's log (its stdout) in LOG_CAPTURE_DIR, when the run captures logs. */
export function keepLog(name: string, text: string): void {
  if (!captureDir || !text) return;
  mkdirSync(captureDir, { recursive: true });
  writeFileSync(join(captureDir, `${name}.log`), text);
}

import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions, Level, LevelWithSilentOrString } from "pino";

/** The parent as pino makes it: the gateway's logger is a pino child. */
type PinoParent = FastifyBaseLogger & { isLevelEnabled(level: LevelWithSilentOrString): boolean };

const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace"] as const;

// The level methods are put on the prototype below (one function per level, no closures made per request).
interface RequestLogger extends Pick<FastifyBaseLogger, (typeof LEVELS)[number]> {}

/** A request's logger that makes its pino child only once a line is enabled: the child serializes its bindings (decision 0023). */
class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: PinoParent,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  /** Writes through the child when `level` is enabled; a disabled level makes nothing. */
  write(level: Level, args: unknown[]): void {
    if (!this.made && !this.parent.isLevelEnabled(level)) return;
    const real = this.real;
    (real[level] as (...line: unknown[]) => void).apply(real, args);
  }

  silent(): void {}

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

for (const level of LEVELS) {
  RequestLogger.prototype[level] = function (this: RequestLogger, ...args: unknown[]) {
    this.write(level, args);
  } as FastifyBaseLogger[typeof level];
}

/** Fastify's childLoggerFactory: a RequestLogger, unless the route sets a level or serializers (then pino's child at once, as Fastify's default). */
export const requestLoggerFactory = (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger =>
  options.level !== undefined || options.serializers !== undefined
    ? logger.child(bindings, options)
    : new RequestLogger(logger as PinoParent, bindings, options);

import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions, Level, LevelWithSilentOrString } from "pino";

/** The parent as pino makes it: the gateway's logger is a pino child. */
type PinoParent = FastifyBaseLogger & { isLevelEnabled(level: LevelWithSilentOrString): boolean };

/**
 * A request's logger that becomes its pino child (with `request_id`) the
 * first time a line is written at an enabled level, or a child or a level is
 * asked of it. Fastify makes one child per request, and pino's child
 * serializes its bindings when made (decision 0023), for a
 * logger that at LOG_LEVEL=warn writes nothing for a request that succeeds.
 * A line it writes is the child's own, so it reads as before.
 */
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
  private write(level: Level, args: unknown[]): void {
    if (!this.made && !this.parent.isLevelEnabled(level)) return;
    const real = this.real;
    (real[level] as (...line: unknown[]) => void).apply(real, args);
  }

  // Methods on the prototype: no closures made per request.
  fatal(...args: unknown[]): void {
    this.write("fatal", args);
  }

  error(...args: unknown[]): void {
    this.write("error", args);
  }

  warn(...args: unknown[]): void {
    this.write("warn", args);
  }

  info(...args: unknown[]): void {
    this.write("info", args);
  }

  debug(...args: unknown[]): void {
    this.write("debug", args);
  }

  trace(...args: unknown[]): void {
    this.write("trace", args);
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

/**
 * Fastify's childLoggerFactory for the gateway: a RequestLogger, unless the
 * route sets a log level or serializers of its own (then pino's child, made
 * at once, as Fastify's default factory does).
 */
export const requestLoggerFactory = (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger =>
  options.level !== undefined || options.serializers !== undefined
    ? logger.child(bindings, options)
    : new RequestLogger(logger as PinoParent, bindings, options);

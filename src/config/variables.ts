import { z } from "zod";
import { ConfigError, duration, flag, integer, oneOf, size } from "./parsers.js";

/** What the schema says of one variable: the configuration table (docs/configuration.md) is made of these (infra/config-table.ts). */
export interface VariableDoc {
  /** The variable. */
  readonly name: string;
  /** The syntax of its value: integer, duration, size, boolean, one of …, string, list, path, URL. */
  readonly type: string;
  /** Taken when the variable is unset or empty, in the variable's own syntax, and read as a set value would be. */
  readonly default?: string;
  /** The table's Default column when it is not the `default` itself (computed at start, or none: "unset"). */
  readonly defaultText?: string;
  /** The table's Meaning column. */
  readonly description: string;
  /** What a value must be beyond its syntax (e.g. "≥ 1"); a value outside is refused at start, naming the variable. */
  readonly bound?: string;
}

type Doc = Omit<VariableDoc, "name">;

/** One variable: its documentation and how its text (undefined: unset or empty) becomes its value. */
export interface Variable<T> {
  readonly doc: Doc;
  readonly parse: (text: string | undefined, name: string) => T;
}

export type ValueOf<V> = V extends Variable<infer T> ? T : never;

/** A variable with a default: unset or empty, it reads `doc.default`. */
export function variable<T>(doc: Doc & { readonly default: string }, parse: (text: string, name: string) => T): Variable<T> {
  return { doc, parse: (text, name) => parse(text ?? doc.default, name) };
}

/** A variable without one: unset or empty, its value is undefined (or what `unset` makes, for a default computed at start). */
export function optional<T>(doc: Doc & { readonly defaultText: string }, parse: (text: string, name: string) => T): Variable<T | undefined> {
  return { doc, parse: (text, name) => (text === undefined ? undefined : parse(text, name)) };
}

/** An integer ≥ `min` (`Number`'s syntax: `10`, `1e3`). */
export const int = (fallback: number, description: string, min = 0) =>
  variable({ type: "integer", default: String(fallback), description, bound: `≥ ${min}` }, (text, name) => integer(text, name, min));

/** A duration (`500ms`, `5s`, `30m`, `2h`, `30d`); `atLeast`: a shorter one is raised to that many milliseconds. */
export const time = (fallback: string, description: string, atLeast?: number) =>
  variable(
    { type: "duration", default: fallback, description, ...(atLeast ? { bound: `at least ${atLeast}ms (a shorter one is raised to it)` } : {}) },
    (text, name) => duration(text, name, atLeast),
  );

/** A size in bytes (`4096`, `64KiB`, `2MiB`, `1GiB`) of at least `min`. */
export const bytes = (fallback: string, description: string, min = 1) =>
  variable({ type: "size", default: fallback, description, bound: `≥ ${min} bytes` }, (text, name) => size(text, name, min));

/** `true`/`1` or `false`/`0`; false when unset. */
export const bool = (description: string) => variable({ type: "boolean", default: "false", description }, flag);

/** One of `allowed` (any case). */
export const choice = <const T extends string>(fallback: NoInfer<T>, allowed: readonly T[], description: string) =>
  variable({ type: `one of ${allowed.join(", ")}`, default: fallback, description }, (text, name) => oneOf(text, name, allowed));

/** Text taken as it is, with a default. */
export const text = (fallback: string, description: string, defaultText?: string) =>
  variable({ type: "string", default: fallback, description, ...(defaultText ? { defaultText } : {}) }, (value) => value);

/** Text taken as it is; undefined when unset or empty. */
export const maybeText = (description: string, defaultText = "unset", type = "string") =>
  optional({ type, defaultText, description }, (value) => value);

/** The schema's documentation of each variable, by its zod schema (a zod registry). */
export const VARIABLE_DOCS = z.registry<VariableDoc>();

type Shape<V> = { [K in keyof V]: z.ZodType<ValueOf<V[K]>, string | undefined> };

/**
 * The variables as one zod object over the environment: each field reads one variable, an empty value counting as
 * unset; a value it refuses is an issue whose message names the variable. Other keys of the environment are ignored.
 */
export function environmentSchema<V extends Record<string, Variable<unknown>>>(variables: V): z.ZodObject<Shape<V>> {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, { doc, parse }] of Object.entries(variables)) {
    const field = z.string().optional().transform((raw, ctx) => {
      try {
        return parse(raw === "" ? undefined : raw, name);
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        ctx.issues.push({ code: "custom", message: error.message, input: raw });
        return z.NEVER;
      }
    });
    VARIABLE_DOCS.add(field, { name, ...doc });
    shape[name] = field;
  }
  return z.object(shape) as unknown as z.ZodObject<Shape<V>>;
}

import { ENVIRONMENT } from "./schema.js";
import { VARIABLE_DOCS, type VariableDoc } from "./variables.js";

/** The document that holds the configuration table, by its path from the repository's root. */
export const TABLE_FILE = "docs/configuration.md";
/** The document that holds the Cassandra and Kafka variables' table (CASSANDRA_*, KAFKA_*), each file under 20 KB. */
export const CASSANDRA_KAFKA_TABLE_FILE = "docs/configuration-cassandra-kafka.md";
/** Every document with a configuration table; together their rows are the schema's variables, in its order. */
export const TABLE_FILES = [TABLE_FILE, CASSANDRA_KAFKA_TABLE_FILE] as const;

/** The document whose table holds the variable. */
export function tableFileOf(name: string): (typeof TABLE_FILES)[number] {
  return /^(CASSANDRA|KAFKA)_/.test(name) ? CASSANDRA_KAFKA_TABLE_FILE : TABLE_FILE;
}

/** The configuration table (in TABLE_FILE) sits between these lines; `npm run docs:config` rewrites what is between them. */
export const TABLE_START = "<!-- config-table:start -->";
export const TABLE_END = "<!-- config-table:end -->";

/** Every variable of the schema, as its registry documents it, in the schema's order. */
export function documentedVariables(): VariableDoc[] {
  return Object.values(ENVIRONMENT.shape).map((field) => {
    const doc = VARIABLE_DOCS.get(field);
    if (!doc) throw new Error("a field of the environment's schema has no documentation");
    return doc;
  });
}

const cell = (text: string) => text.replace(/\|/g, "\\|");

/** The configuration table: one row per variable, its default (the value, or what stands for it) and its meaning. */
export function configurationTable(variables: readonly VariableDoc[] = documentedVariables()): string {
  const rows = variables.map((v) => `| \`${v.name}\` | ${cell(v.defaultText ?? `\`${v.default}\``)} | ${cell(v.description)} |`);
  return ["| Variable | Default | Meaning |", "|---|---|---|", ...rows].join("\n");
}

/** The table of one of TABLE_FILES: the rows of the variables it holds. */
export function tableOf(file: (typeof TABLE_FILES)[number]): string {
  return configurationTable(documentedVariables().filter((v) => tableFileOf(v.name) === file));
}

/** `markdown` with the text between the table's markers replaced by the table; it must hold each marker once. */
export function withConfigurationTable(markdown: string, table = configurationTable()): string {
  const start = markdown.indexOf(TABLE_START);
  const end = markdown.indexOf(TABLE_END);
  if (start < 0 || end < start || markdown.indexOf(TABLE_START, start + 1) >= 0) {
    throw new Error(`a configuration document must hold ${TABLE_START} once, then ${TABLE_END}`);
  }
  return `${markdown.slice(0, start + TABLE_START.length)}\n${table}\n${markdown.slice(end)}`;
}

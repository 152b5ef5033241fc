import { ENVIRONMENT } from "./schema.js";
import { VARIABLE_DOCS, type VariableDoc } from "./variables.js";

/** The document that holds the configuration table, by its path from the repository's root. */
export const TABLE_FILE = "docs/configuration.md";

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

/** `markdown` with the text between the table's markers replaced by the table; it must hold each marker once. */
export function withConfigurationTable(markdown: string, table = configurationTable()): string {
  const start = markdown.indexOf(TABLE_START);
  const end = markdown.indexOf(TABLE_END);
  if (start < 0 || end < start || markdown.indexOf(TABLE_START, start + 1) >= 0) {
    throw new Error(`${TABLE_FILE} must hold ${TABLE_START} once, then ${TABLE_END}`);
  }
  return `${markdown.slice(0, start + TABLE_START.length)}\n${table}\n${markdown.slice(end)}`;
}

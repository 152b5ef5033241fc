import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { ApiKey, KeyLimits } from "../../../gen/generation/v1/admin_service_pb.js";
import { KeyLimitsSchema } from "../../../gen/generation/v1/admin_service_pb.js";
import { account } from "../rpc.js";
import { act, field, form, h, input, say, section, table } from "../ui.js";
import { loadModels } from "./prices.js";

const LIMIT_FIELDS = [
  ["spend_limit", "Spend limit, all time (USD)", "spendLimit", "money"],
  ["daily_spend_limit", "Spend limit per UTC day (USD)", "dailySpendLimit", "money"],
  ["monthly_spend_limit", "Spend limit per UTC month (USD)", "monthlySpendLimit", "money"],
  ["rate_limit_per_minute", "Requests per minute", "rateLimitPerMinute", "count"],
  ["max_concurrent_jobs", "Concurrent jobs", "maxConcurrentJobs", "count"],
] as const;

/** The limits a form names (empty fields: no limit). */
function limitsOf(data: FormData, prefix = ""): { limits: KeyLimits; named: string[] } {
  const limits = create(KeyLimitsSchema, {});
  const named: string[] = [];
  for (const [path, , property, kind] of LIMIT_FIELDS) {
    const text = String(data.get(prefix + path) ?? "").trim();
    named.push(path);
    if (text === "") continue;
    if (kind === "money") (limits as unknown as Record<string, string>)[property] = text;
    else (limits as unknown as Record<string, number>)[property] = Number(text);
  }
  return { limits, named };
}

function limitInputs(prefix: string, current?: KeyLimits): HTMLElement[] {
  return LIMIT_FIELDS.map(([path, label, property, kind]) => {
    const value = current?.[property];
    return field(label, input(prefix + path, {
      inputmode: kind === "money" ? "decimal" : "numeric", autocomplete: "off", placeholder: "no limit",
      value: value === undefined ? undefined : String(value),
    }));
  });
}

function limitsText(key: ApiKey): string {
  const parts: string[] = [];
  const l = key.limits;
  if (l?.spendLimit) parts.push(`$${l.spendLimit} total (left $${key.remaining})`);
  if (l?.dailySpendLimit) parts.push(`$${l.dailySpendLimit}/day (left $${key.remainingToday})`);
  if (l?.monthlySpendLimit) parts.push(`$${l.monthlySpendLimit}/month (left $${key.remainingThisMonth})`);
  if (l?.rateLimitPerMinute !== undefined) parts.push(`${l.rateLimitPerMinute}/min`);
  if (l?.maxConcurrentJobs !== undefined) parts.push(`${l.maxConcurrentJobs} at once`);
  return parts.join(", ") || "none";
}

export async function keysView(refresh: () => void): Promise<HTMLElement> {
  const [{ keys }, models] = await Promise.all([account.listApiKeys({}), loadModels()]);
  const explicit = models.filter((model) => model.explicitGrantRequired).map((model) => model.id);
  const secretBox = h("div", { class: "secret", hidden: true, "data-testid": "new-key" });

  const grants = h("fieldset", {},
    h("legend", {}, "Models this key may use"),
    h("label", { class: "check" }, input("grant", { type: "checkbox", value: "*", checked: true }), " ", h("code", {}, "*"), " every model"),
    h("p", { class: "hint", id: "grant-rule" },
      "\"*\" grants every model except ",
      ...explicit.flatMap((id, i) => [i > 0 ? ", " : "", h("code", {}, id)]),
      explicit.length === 1 ? ", which needs a grant of its own: tick it below as well to allow it." : ", which need grants of their own."),
    ...models.map((model) => h("label", { class: "check" }, input("grant", { type: "checkbox", value: model.id }), " ", h("code", {}, model.id),
      model.explicitGrantRequired ? h("span", { class: "badge" }, "own grant needed") : "")));

  const createForm = form("Create an API key", [grants, h("fieldset", {}, h("legend", {}, "Limits (optional)"), ...limitInputs("new_"))], "Create key", async (data) => {
    const { limits } = limitsOf(data, "new_");
    const chosen = data.getAll("grant").map(String);
    const created = await account.createAccountApiKey({ models: chosen, limits });
    secretBox.hidden = false;
    secretBox.replaceChildren(
      h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), " Key ", h("code", {}, created.key!.keyId), " may use ", created.key!.models.join(", "), "."),
      h("output", { "data-testid": "api-key-secret", "aria-label": "The new API key" }, created.apiKey),
      h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(created.apiKey).then(() => say("Copied.")) }, "Copy"),
      h("button", { type: "button", onclick: () => refresh() }, "Done"));
    say(`Key ${created.key!.keyId} created.`);
    secretBox.querySelector("output")?.scrollIntoView({ block: "center" });
  });

  const rows = keys.map((key) => {
    const revoke = h("button", { type: "button", class: "danger", disabled: key.revoked, "aria-label": `Revoke ${key.keyId}` }, "Revoke");
    revoke.addEventListener("click", () => {
      if (!confirm(`Revoke ${key.keyId}? Requests with it are refused at once.`)) return;
      void act(revoke, async () => {
        await account.revokeAccountApiKey({ keyId: key.keyId });
        say(`Key ${key.keyId} revoked.`);
        refresh();
      });
    });
    const edit = h("details", {}, h("summary", {}, "Limits"),
      form(`Limits of ${key.keyId}`, limitInputs(`${key.keyId}_`, key.limits), "Save limits", async (data) => {
        const { limits, named } = limitsOf(data, `${key.keyId}_`);
        await account.updateAccountApiKey({ keyId: key.keyId, limits, updateMask: create(FieldMaskSchema, { paths: named }) });
        say(`Limits of ${key.keyId} saved.`);
        refresh();
      }));
    return [h("code", {}, key.keyId), key.models.join(", "), limitsText(key), `$${key.spent} (today $${key.spentToday})`,
      key.revoked ? h("span", { class: "badge warn" }, "revoked") : "active", key.revoked ? "" : h("div", { class: "actions" }, edit, revoke)];
  });

  return section("Keys of the account",
    h("p", {}, "Each key spends from this account's balance and may use only the models it is granted. Its secret is shown once, when it is created."),
    table(["Key", "Grants", "Limits", "Spent", "Status", ""], rows, "API keys of the account"),
    h("h3", {}, "New key"), secretBox, createForm);
}

import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { ApiKey, KeyLimits } from "../../../gen/generation/v1/admin_service_pb.js";
import type { Model } from "../../../gen/generation/v1/model_pb.js";
import { KeyLimitsSchema } from "../../../gen/generation/v1/admin_service_pb.js";
import { account } from "../rpc.js";
import { act, field, form, h, input, say, section, table, usd } from "../ui.js";
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

/** What each limit allows and leaves, amounts to the cent (exact on hover). */
function limitsText(key: ApiKey): HTMLElement {
  const parts: (Node | string)[][] = [];
  const l = key.limits;
  if (l?.spendLimit) parts.push([usd(l.spendLimit, {}, " total"), " (left ", usd(key.remaining), ")"]);
  if (l?.dailySpendLimit) parts.push([usd(l.dailySpendLimit, {}, "/day"), " (left ", usd(key.remainingToday), ")"]);
  if (l?.monthlySpendLimit) parts.push([usd(l.monthlySpendLimit, {}, "/month"), " (left ", usd(key.remainingThisMonth), ")"]);
  if (l?.rateLimitPerMinute !== undefined) parts.push([`${l.rateLimitPerMinute}/min`]);
  if (l?.maxConcurrentJobs !== undefined) parts.push([`${l.maxConcurrentJobs} at once`]);
  return h("span", {}, ...(parts.length === 0 ? ["none"] : parts.flatMap((part, i) => [i > 0 ? ", " : "", ...part])));
}

/** The grants of a new key: nothing ticked at first; "*" is a choice like any model, explained beside it. */
function grantChoices(models: Model[]): HTMLFieldSetElement {
  const explicit = models.filter((model) => model.explicitGrantRequired).map((model) => model.id);
  return h("fieldset", { "aria-describedby": "grant-rule" },
    h("legend", {}, "Models this key may use (tick at least one)"),
    h("p", { class: "hint", id: "grant-rule" },
      "Tick only the models the key needs: a leaked key can then spend only on those. \"*\" grants every model except ",
      ...explicit.flatMap((id, i) => [i > 0 ? ", " : "", h("code", {}, id)]),
      explicit.length === 1 ? ", which needs a grant of its own: tick it below as well to allow it." : ", which need grants of their own.",
      " Models added to the service later are granted by \"*\" too."),
    h("label", { class: "check" }, input("grant", { type: "checkbox", value: "*" }), " ", h("code", {}, "*"), " every model"),
    ...models.map((model) => h("label", { class: "check" }, input("grant", { type: "checkbox", value: model.id }), " ", h("code", {}, model.id),
      model.explicitGrantRequired ? h("span", { class: "badge" }, "own grant needed") : "")));
}

function keyRows(keys: ApiKey[], reload: () => Promise<void>): (Node | string)[][] {
  return keys.map((key) => {
    const revoke = h("button", { type: "button", class: "danger", disabled: key.revoked, "aria-label": `Revoke ${key.keyId}` }, "Revoke");
    revoke.addEventListener("click", () => {
      if (!confirm(`Revoke ${key.keyId}? Requests with it are refused at once.`)) return;
      void act(revoke, async () => {
        await account.revokeAccountApiKey({ keyId: key.keyId });
        await reload();
        say(`Key ${key.keyId} revoked.`);
      });
    });
    const edit = h("details", {}, h("summary", {}, "Limits"),
      form(`Limits of ${key.keyId}`, limitInputs(`${key.keyId}_`, key.limits), "Save limits", async (data) => {
        const { limits, named } = limitsOf(data, `${key.keyId}_`);
        await account.updateAccountApiKey({ keyId: key.keyId, limits, updateMask: create(FieldMaskSchema, { paths: named }) });
        await reload();
        say(`Limits of ${key.keyId} saved.`);
      }));
    return [h("code", {}, key.keyId), key.models.join(", "), limitsText(key), h("span", {}, usd(key.spent), " (today ", usd(key.spentToday), ")"),
      key.revoked ? h("span", { class: "badge warn" }, "revoked") : "active", key.revoked ? "" : h("div", { class: "actions" }, edit, revoke)];
  });
}

export async function keysView(): Promise<HTMLElement> {
  const [{ keys }, models] = await Promise.all([account.listApiKeys({}), loadModels()]);
  const secretBox = h("div", { class: "secret", hidden: true, "data-testid": "new-key" });
  const list = h("div", {});
  // The list alone is read again after a change: the new key's secret and the form stay as they are.
  const reload = async () => {
    list.replaceChildren(table(["Key", "Grants", "Limits", "Spent", "Status", ""], keyRows((await account.listApiKeys({})).keys, reload), "API keys of the account"));
  };
  list.replaceChildren(table(["Key", "Grants", "Limits", "Spent", "Status", ""], keyRows(keys, reload), "API keys of the account"));

  const createForm = form("Create an API key", [grantChoices(models), h("fieldset", {}, h("legend", {}, "Limits (optional)"), ...limitInputs("new_"))],
    "Create key", async (data) => {
      const chosen = data.getAll("grant").map(String);
      if (chosen.length === 0) {
        say("Tick at least one model (or \"*\") for the key: a key with no model could call nothing.", "error");
        createForm.querySelector<HTMLInputElement>("input[name=grant]")?.focus();
        return;
      }
      const { limits } = limitsOf(data, "new_");
      const created = await account.createAccountApiKey({ models: chosen, limits });
      secretBox.hidden = false;
      secretBox.replaceChildren(
        h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), " Key ", h("code", {}, created.key!.keyId), " may use ", created.key!.models.join(", "), "."),
        h("output", { "data-testid": "api-key-secret", "aria-label": "The new API key" }, created.apiKey),
        h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(created.apiKey).then(() => say("Copied.")) }, "Copy"),
        h("button", { type: "button", onclick: () => { secretBox.hidden = true; secretBox.replaceChildren(); } }, "Done"));
      createForm.reset();
      await reload();
      say(`Key ${created.key!.keyId} created.`);
      secretBox.querySelector("output")?.scrollIntoView({ block: "center" });
    });

  return section("Keys of the account",
    h("p", {}, "Each key spends from this account's balance and may use only the models it is granted. Its secret is shown once, when it is created."),
    list, h("h3", {}, "New key"), secretBox, createForm);
}

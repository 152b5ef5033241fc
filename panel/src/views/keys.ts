import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { ApiKey, KeyLimits } from "../../../gen/generation/v1/admin_service_pb.js";
import type { Model } from "../../../gen/generation/v1/model_pb.js";
import { KeyLimitsSchema } from "../../../gen/generation/v1/admin_service_pb.js";
import { account } from "../rpc.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { act, field, form, h, input, say, section, table, usd, utc } from "../ui.js";
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

/** Grant checkboxes: none ticked for a new key, the key's own for an edit; "*" is a choice like any model, explained beside it. */
export function grantChoices(models: Model[], name = "grant", ticked: readonly string[] = [], ruleId = "grant-rule"): HTMLFieldSetElement {
  const explicit = models.filter((model) => model.explicitGrantRequired).map((model) => model.id);
  const box = (value: string) => input(name, { type: "checkbox", value, checked: ticked.includes(value) });
  return h("fieldset", { "aria-describedby": ruleId },
    h("legend", {}, "Models this key may use (tick at least one)"),
    h("p", { class: "hint", id: ruleId },
      "Tick only the models the key needs: a leaked key can then spend only on those. \"*\" grants every model except ",
      ...explicit.flatMap((id, i) => [i > 0 ? ", " : "", h("code", {}, id)]),
      explicit.length === 1 ? ", which needs a grant of its own: tick it below as well to allow it." : ", which need grants of their own.",
      " Models added to the service later are granted by \"*\" too."),
    h("label", { class: "check" }, box("*"), " ", h("code", {}, "*"), " every model"),
    ...models.map((model) => h("label", { class: "check" }, box(model.id), " ", h("code", {}, model.id),
      model.explicitGrantRequired ? h("span", { class: "badge" }, "own grant needed") : "")));
}

/** What a key list may do to a key: the owner's AccountService calls or the operator's AdminService ones. */
export interface KeyActions {
  readonly update: (keyId: string, change: { name: string; models: string[]; limits: KeyLimits; paths: string[] }) => Promise<unknown>;
  readonly rotate: (keyId: string, graceSeconds: number) => Promise<{ apiKey: string; key?: ApiKey }>;
  readonly revoke: (keyId: string) => Promise<unknown>;
}

export const OWNER_KEY_ACTIONS: KeyActions = {
  update: (keyId, { name, models, limits, paths }) => account.updateAccountApiKey({ keyId, name, models, limits, updateMask: create(FieldMaskSchema, { paths }) }),
  rotate: (keyId, graceSeconds) => account.rotateAccountApiKey({ keyId, graceSeconds }),
  revoke: (keyId) => account.revokeAccountApiKey({ keyId }),
};

/** A secret shown once (a new key's, a rotated key's), with Copy and Done. */
export function showSecret(box: HTMLElement, intro: (Node | string)[], secret: string, testId = "api-key-secret"): void {
  box.hidden = false;
  box.replaceChildren(
    h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), " ", ...intro),
    h("output", { "data-testid": testId, "aria-label": "The new API key" }, secret),
    h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(secret).then(() => say("Copied.")) }, "Copy"),
    h("button", { type: "button", onclick: () => { box.hidden = true; box.replaceChildren(); } }, "Done"));
  box.querySelector("output")?.scrollIntoView({ block: "center" });
}

/** Edit (name, grants, limits) and Rotate (a grace in seconds) of one key. */
function keyForms(key: ApiKey, models: Model[], actions: KeyActions, secretBox: HTMLElement, reload: () => Promise<void>): HTMLElement[] {
  const prefix = `${key.keyId}_`;
  const edit = h("details", {}, h("summary", {}, "Edit"),
    form(`Edit ${key.keyId}`, [
      field("Name", input(`${prefix}name`, { value: key.name, maxlength: 200, autocomplete: "off" })),
      grantChoices(models, `${prefix}grant`, key.models, `${prefix}grant-rule`),
      h("fieldset", {}, h("legend", {}, "Limits (empty: no limit)"), ...limitInputs(prefix, key.limits)),
    ], "Save key", async (data) => {
      const chosen = data.getAll(`${prefix}grant`).map(String);
      if (chosen.length === 0) return say("Tick at least one model (or \"*\") for the key: a key with no model could call nothing.", "error");
      const { limits, named } = limitsOf(data, prefix);
      await actions.update(key.keyId, { name: String(data.get(`${prefix}name`) ?? "").trim(), models: chosen, limits, paths: ["name", "models", ...named] });
      await reload();
      say(`Key ${key.keyId} saved: it may use ${chosen.join(", ")}, at once.`);
    }));
  const rotate = h("details", {}, h("summary", {}, "Rotate"),
    form(`Rotate ${key.keyId}`, [
      field("Grace (seconds)", input(`${prefix}grace`, { type: "number", min: 0, max: 86400, step: 1, value: "0", inputmode: "numeric" }),
        "How long the old secret keeps working: 0 ends it at once (at most 86400, a day)."),
    ], "Rotate secret", async (data) => {
      const grace = Number(data.get(`${prefix}grace`) || "0");
      const rotated = await actions.rotate(key.keyId, grace);
      showSecret(secretBox, ["Key ", h("code", {}, key.keyId), grace > 0 ? ` has a new secret; the old one works for ${grace} s more.` : " has a new secret; the old one no longer works."], rotated.apiKey);
      await reload();
      say(`Key ${key.keyId} rotated.`);
    }));
  return [edit, rotate];
}

/** The rows of a key list: name, id, grants, limits, spending, status, and its actions while it is active. */
export function keyRows(keys: ApiKey[], models: Model[], actions: KeyActions, secretBox: HTMLElement, reload: () => Promise<void>): (Node | string)[][] {
  return keys.map((key) => {
    const revoke = h("button", { type: "button", class: "danger", disabled: key.revoked, "aria-label": `Revoke ${key.keyId}` }, "Revoke");
    revoke.addEventListener("click", () => {
      if (!confirm(`Revoke ${key.keyId}? Requests with it are refused at once.`)) return;
      void act(revoke, async () => {
        await actions.revoke(key.keyId);
        await reload();
        say(`Key ${key.keyId} revoked.`);
      });
    });
    const grace = key.rotationGraceExpireTime ? ` (old secret until ${utc(timestampDate(key.rotationGraceExpireTime))} UTC)` : "";
    return [key.name || h("span", { class: "hint" }, "unnamed"), h("code", {}, key.keyId), key.models.join(", "), limitsText(key),
      h("span", {}, usd(key.spent), " (today ", usd(key.spentToday), ")"),
      key.revoked ? h("span", { class: "badge warn" }, "revoked") : `active${grace}`,
      key.revoked ? "" : h("div", { class: "actions" }, ...keyForms(key, models, actions, secretBox, reload), revoke)];
  });
}

export const KEY_HEADERS = ["Name", "Key", "Grants", "Limits", "Spent", "Status", ""];

export async function keysView(): Promise<HTMLElement> {
  const [{ keys }, models] = await Promise.all([account.listApiKeys({}), loadModels()]);
  const secretBox = h("div", { class: "secret", hidden: true, "data-testid": "new-key" });
  const list = h("div", {});
  // The list alone is read again after a change: the new key's secret and the form stay as they are.
  const render = (list_: ApiKey[]) => table(KEY_HEADERS, keyRows(list_, models, OWNER_KEY_ACTIONS, secretBox, reload), "API keys of the account");
  const reload = async () => {
    list.replaceChildren(render((await account.listApiKeys({})).keys));
  };
  list.replaceChildren(render(keys));

  const createForm = form("Create an API key", [
    field("Name", input("name", { maxlength: 200, autocomplete: "off", placeholder: "e.g. production" }), "Shown in lists; the key works the same without one."),
    grantChoices(models), h("fieldset", {}, h("legend", {}, "Limits (optional)"), ...limitInputs("new_"))],
    "Create key", async (data) => {
      const chosen = data.getAll("grant").map(String);
      if (chosen.length === 0) {
        say("Tick at least one model (or \"*\") for the key: a key with no model could call nothing.", "error");
        createForm.querySelector<HTMLInputElement>("input[name=grant]")?.focus();
        return;
      }
      const { limits } = limitsOf(data, "new_");
      const created = await account.createAccountApiKey({ models: chosen, limits, name: String(data.get("name") ?? "").trim() });
      createForm.reset();
      await reload();
      showSecret(secretBox, ["Key ", h("code", {}, created.key!.keyId), " may use ", created.key!.models.join(", "), "."], created.apiKey);
      say(`Key ${created.key!.keyId} created.`);
    });

  return section("Keys of the account",
    h("p", {}, "Each key spends from this account's balance and may use only the models it is granted. Its secret is shown once, when it is created."),
    list, h("h3", {}, "New key"), secretBox, createForm);
}

import { timestampDate } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { AccountDetails, AccountSummary } from "../../../gen/generation/v1/admin_service_pb.js";
import type { LedgerEntry } from "../../../gen/generation/v1/money_pb.js";
import { LedgerEntryType } from "../../../gen/generation/v1/money_pb.js";
import { admin, downloadCsv } from "../rpc.js";
import { signIn } from "../session.js";
import { act, downloadButton, field, form, h, input, navigate, say, section, table, usd, utc } from "../ui.js";
import { settingsForm, type AccountSettings } from "./account-settings.js";
import { auditTrail } from "./audit.js";
import { KEY_HEADERS, keyRows, type KeyActions } from "./keys.js";
import { entryType } from "./money.js";
import { loadModels } from "./prices.js";

const ADMIN_KEY_ACTIONS: KeyActions = {
  update: (keyId, { name, models, limits, paths }) => admin.updateApiKey({ keyId, name, models, limits, updateMask: create(FieldMaskSchema, { paths }) }),
  rotate: (keyId, graceSeconds) => admin.rotateApiKey({ keyId, graceSeconds }),
  revoke: (keyId) => admin.revokeApiKey({ keyId }),
};

const accountLink = (summary: AccountSummary) => h("a", { href: `#/accounts/${summary.accountId}` }, summary.name || summary.accountId);

/** The operator's home: every account, searched by name prefix or id prefix (acct_…), a page at a time; and opening one. */
export async function accountsView(): Promise<HTMLElement> {
  const list = h("div", {});
  const next = h("button", { type: "button", hidden: true }, "Next page");
  const first = h("button", { type: "button", hidden: true }, "First page");
  let q = "";
  let nextToken = "";
  const load = async (pageToken: string) => {
    const page = await admin.listAccounts({ q, pageToken, limit: 20 });
    list.replaceChildren(table(["Name", "Account", "Balance", "Reserved", "Open jobs", "Opened (UTC)", "Status"], page.accounts.map((summary) => [
      accountLink(summary), h("code", {}, summary.accountId), usd(summary.balance?.balance), usd(summary.balance?.reserved), String(summary.openJobs),
      utc(summary.createdAt ? timestampDate(summary.createdAt) : undefined), summary.status,
    ]), q ? `Accounts starting with "${q}"` : "All accounts"));
    nextToken = page.nextPageToken;
    next.hidden = nextToken === "";
    first.hidden = pageToken === "";
  };
  next.addEventListener("click", () => void act(next, () => load(nextToken)));
  first.addEventListener("click", () => void act(first, () => load("")));
  await load("");
  return h("div", {},
    section("Find an account",
      form("Find an account", [field("Find an account", input("q", { type: "search", autocomplete: "off", spellcheck: false, maxlength: 200 }),
        "The start of its name (any case), or of its id (acct_…). Empty: every account.")], "Search", async (data) => {
        q = String(data.get("q") ?? "").trim();
        await load("");
      }),
      list, h("div", { class: "actions" }, first, next)),
    section("Open an account",
      form("Open an account", [
        field("Name", input("name", { required: true, autocomplete: "off" })),
        field("Opening balance (USD)", input("balance", { inputmode: "decimal", autocomplete: "off", placeholder: "0" })),
      ], "Open account", async (data) => {
        const created = await admin.createAccount({ name: String(data.get("name")), balance: String(data.get("balance") ?? "") });
        navigate(`#/accounts/${created.accountId}`, `Account ${created.accountId} opened.`);
      })));
}

const ENTRY_TYPES: [string, LedgerEntryType | undefined][] = [
  ["every type", undefined], ["credit", LedgerEntryType.CREDIT], ["hold", LedgerEntryType.HOLD], ["charge", LedgerEntryType.CHARGE], ["release", LedgerEntryType.RELEASE],
  ["adjustment", LedgerEntryType.ADJUSTMENT],
];
const ENTRY_NAME = Object.fromEntries(ENTRY_TYPES.filter(([, type]) => type !== undefined).map(([name, type]) => [type, name]));

/** The account's statement, paged, filtered by type, with its CSV downloads (statement, usage by day); `reload` reads it again from the newest entry. */
async function statementSection(accountId: string): Promise<{ element: HTMLElement; reload: () => Promise<void> }> {
  const rows = h("tbody", {});
  const older = h("button", { type: "button", hidden: true }, "Older entries");
  let pageToken = "";
  let type = "";
  const load = async () => {
    const chosen = ENTRY_TYPES.find(([name]) => name === type)?.[1];
    const page = await admin.listAccountLedgerEntries({ accountId, query: { limit: 20, pageToken, types: chosen === undefined ? [] : [chosen] } });
    rows.append(...page.entries.map((entry: LedgerEntry) => h("tr", {}, ...[
      utc(timestampDate(entry.createdAt!)), entryType(entry, ENTRY_NAME), usd(entry.amount), usd(entry.balanceAfter), usd(entry.reservedChange),
      entry.model ?? "", entry.jobId ? h("code", {}, entry.jobId.slice(0, 8)) : "", entry.keyId ?? ""].map((cell) => h("td", {}, cell)))));
    pageToken = page.nextPageToken;
    older.hidden = pageToken === "";
  };
  older.addEventListener("click", () => void act(older, load));
  const reload = async () => {
    pageToken = "";
    rows.replaceChildren();
    await load();
  };
  await load();
  const filter = form("Filter the statement", [field("Type", h("select", { name: "type" }, ...ENTRY_TYPES.map(([name]) => h("option", { value: name === "every type" ? "" : name }, name))))],
    "Apply filters", async (data) => {
      type = String(data.get("type") ?? "");
      await reload();
    });
  const base = `/admin/v1/accounts/${encodeURIComponent(accountId)}`;
  const element = section("Statement",
    h("div", { class: "actions" },
      downloadButton("Download the statement (CSV)", () => `${base}/ledger${type ? `?type=${type}` : ""}`, downloadCsv),
      downloadButton("Download usage by day (CSV)", () => `${base}/usage?group_by=day`, downloadCsv)),
    filter,
    h("div", { class: "scroll", role: "region", "aria-label": "Statement", tabindex: 0 },
      h("table", { "data-testid": "statement" }, h("caption", {}, "Statement, newest first"),
        h("thead", {}, h("tr", {}, ...["When (UTC)", "Type", "Amount", "Balance after", "Reserved change", "Model", "Job", "Key"].map((t) => h("th", { scope: "col" }, t)))),
        rows)),
    older);
  return { element, reload };
}

const settingsOf = (details: AccountDetails): AccountSettings => ({
  name: details.summary?.name ?? "", lowBalanceThreshold: details.lowBalanceThreshold, lowBalance: details.lowBalance, available: details.summary?.balance?.available,
});

/**
 * The operator's money actions on an account: a credit (AddCredits, an optional reason kept in the audit entry) and an
 * adjustment (AdjustBalance: credit or debit, a required reason, shown in the statement). `changed` reads the figures
 * and the statement again.
 */
function moneyForms(accountId: string, changed: () => Promise<void>): HTMLElement[] {
  const creditKey = submissionKey();
  const adjustKey = submissionKey();
  const credit = form(`Credit ${accountId}`, [
    field("Amount (USD)", input("amount", { inputmode: "decimal", required: true, autocomplete: "off" })),
    field("Reason (optional)", input("reason", { maxlength: 500, autocomplete: "off" }), "Kept in the audit entry of the credit."),
  ], "Add credit", async (data) => {
    await admin.addCredits({ accountId, amount: String(data.get("amount")), reason: String(data.get("reason") ?? "").trim(), idempotencyKey: creditKey.key });
    credit.reset();
    creditKey.renew();
    await changed();
    say(`Credited ${accountId}.`);
  });
  const adjust = form(`Adjust ${accountId}`, [
    field("Direction", h("select", { name: "direction" }, h("option", { value: "credit" }, "credit (adds)"), h("option", { value: "debit" }, "debit (takes away)"))),
    field("Adjustment (USD)", input("amount", { inputmode: "decimal", required: true, autocomplete: "off" }), "Without a sign; a debit never takes more than is available."),
    field("Reason", input("reason", { required: true, maxlength: 500, autocomplete: "off" }), "Required; shown in the statement next to the adjustment."),
  ], "Adjust balance", async (data) => {
    const amount = String(data.get("amount") ?? "").trim().replace(/^[+-]/, "");
    const signed = data.get("direction") === "debit" ? `-${amount}` : amount;
    const { entry } = await admin.adjustBalance({ accountId, amount: signed, reason: String(data.get("reason") ?? ""), idempotencyKey: adjustKey.key });
    adjust.reset();
    adjustKey.renew();
    await changed();
    say(`Adjusted ${accountId} by ${entry?.amount ?? signed} USD.`);
  });
  // What the operator types is another request: another key (the same key with another body would be refused).
  credit.addEventListener("input", creditKey.renew);
  adjust.addEventListener("input", adjustKey.renew);
  return [h("div", {}, h("h3", {}, "Credit"), credit), h("div", {}, h("h3", {}, "Adjust (credit or debit with a reason)"), adjust)];
}

/**
 * The Idempotency-Key of one filled-in money form (decision 0039): every submission of the same figures (a double
 * click, a retry after an error whose answer was lost) sends the same key, so the money moves once; a new key once
 * the form succeeded or was changed.
 */
function submissionKey() {
  const state = { key: crypto.randomUUID(), renew: () => (state.key = crypto.randomUUID()) };
  return state;
}

/** One account for the operator: its figures, settings, credit and adjustment, keys (edit, rotate, revoke), owner token, statement and audit entries. */
export async function accountView(accountId: string, onSignedIn: () => void): Promise<HTMLElement> {
  const [{ account: details }, { keys }, models] = await Promise.all([
    admin.getAccount({ accountId }), admin.listAccountApiKeys({ accountId }), loadModels()]);
  if (!details?.summary) return h("p", { role: "alert" }, `No account ${accountId}.`);
  const figures = h("p", {});
  const showFigures = (d: AccountDetails) => {
    const s = d.summary!;
    figures.replaceChildren("Balance ", usd(s.balance?.balance), ", reserved ", usd(s.balance?.reserved), ", available ",
      h("strong", {}, usd(s.balance?.available, { "data-testid": "operator-available" })), `; ${s.openJobs} open jobs; ${s.status}; opened ${utc(s.createdAt ? timestampDate(s.createdAt) : undefined)} UTC.`,
      d.lowBalance ? h("span", { class: "badge warn" }, "low balance") : "",
      " Webhook: ", h("code", { "data-testid": "operator-webhook" }, d.webhookUrl === "" ? "none" : d.webhookUrl), ".");
  };
  showFigures(details);

  const secretBox = h("div", { class: "secret", hidden: true, "data-testid": "new-key" });
  const keyList = h("div", {});
  const reloadKeys = async () => {
    keyList.replaceChildren(table(KEY_HEADERS, keyRows((await admin.listAccountApiKeys({ accountId })).keys, models, ADMIN_KEY_ACTIONS, secretBox, reloadKeys), `Keys of ${accountId}`));
  };
  keyList.replaceChildren(table(KEY_HEADERS, keyRows(keys, models, ADMIN_KEY_ACTIONS, secretBox, reloadKeys), `Keys of ${accountId}`));

  const tokenBox = h("div", { class: "secret", hidden: true });
  const issue = h("button", { type: "button" }, "Issue an owner token");
  issue.addEventListener("click", () => void act(issue, async () => {
    const { ownerToken, tokenId } = await admin.createOwnerToken({ accountId });
    const signInButton = h("button", { type: "button" }, "Sign in as this owner");
    signInButton.addEventListener("click", () => void act(signInButton, async () => {
      await signIn(ownerToken);
      onSignedIn();
    }));
    tokenBox.hidden = false;
    tokenBox.replaceChildren(
      h("p", {}, h("strong", {}, "Give this token to the account's owner now: it is shown only once."), ` (id ${tokenId}; revoke it as a key.)`),
      h("output", { "data-testid": "owner-token", "aria-label": "The owner token" }, ownerToken), signInButton);
    await reloadKeys();
    say(`Owner token ${tokenId} issued.`);
  }));
  const statement = await statementSection(accountId);
  const audit = h("div", {});
  const showAudit = async () => audit.replaceChildren(await auditTrail((query) => admin.listAuditEvents({ ...query, accountId }), { accountId, chooseAccount: false, caption: `Audit entries of ${accountId}` }));
  await showAudit();
  const changed = async () => {
    const { account: again } = await admin.getAccount({ accountId });
    if (again) showFigures(again);
    await Promise.all([statement.reload(), showAudit()]);
  };
  const moneyActions = h("div", { class: "money-actions", "data-slot": "money-actions" }, ...moneyForms(accountId, changed));
  const heading = h("h2", { id: "s-account" }, details.summary.name || accountId);
  const settings = h("div", { "data-slot": "account-settings" }, h("div", {}, h("h3", {}, "Settings"),
    settingsForm(`Settings of ${accountId}`, settingsOf(details), async (change) => {
      const { account: updated } = await admin.updateAccount({ accountId, ...change });
      if (updated) showFigures(updated);
      void showAudit();
      return settingsOf(updated!);
    }, (saved) => { heading.textContent = saved.name || accountId; })));
  return h("div", {},
    h("p", {}, h("a", { href: "#/accounts" }, "← All accounts")),
    h("section", { "aria-labelledby": "s-account" }, heading, h("p", {}, "Account ", h("code", {}, accountId)), figures, moneyActions, settings),
    section("Keys", keyList, secretBox, issue, tokenBox),
    statement.element,
    section("Audit entries", audit));
}

import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { LedgerEntry } from "../../../gen/generation/v1/money_pb.js";
import { LedgerEntrySource, LedgerEntryType } from "../../../gen/generation/v1/money_pb.js";
import { account, generation } from "../rpc.js";
import { act, field, form, fromUtcField, h, input, section, usd, utc, utcField } from "../ui.js";
import { loadModels } from "./prices.js";

const HEADERS = ["When (UTC)", "Model", "Key", "Tokens in", "Tokens out", "Charge", "Status"];

/** A finished call's status: charged, or why its hold was released without a charge. */
function statusOf(entry: LedgerEntry): string {
  if (entry.type === LedgerEntryType.CHARGE) return "charged";
  return entry.reason ? `not charged: ${entry.reason.replaceAll("_", " ")}` : "not charged";
}

function row(entry: LedgerEntry): HTMLTableRowElement {
  return h("tr", {},
    h("td", {}, utc(timestampDate(entry.createdAt!))),
    h("td", {}, entry.model ?? ""),
    h("td", {}, h("code", {}, entry.keyId ?? "")),
    h("td", { class: "num" }, String(entry.promptTokenCount)),
    h("td", { class: "num" }, String(entry.candidatesTokenCount)),
    h("td", { class: "num" }, usd(entry.amount.replace(/^-/, ""))),
    h("td", {}, statusOf(entry)));
}

/**
 * The owner's synchronous text calls (generateContent, streams, OpenAI's chat
 * completions), one row per finished call: the statement's charge or release
 * of a hold with a model and no job (ListLedgerEntries, source text_call).
 */
export async function textActivityView(): Promise<HTMLElement> {
  const [models, { keys }] = await Promise.all([loadModels(), account.listApiKeys({})]);
  const rows = h("tbody", {});
  const older = h("button", { type: "button", hidden: true }, "Older calls");
  let pageToken = "";
  let filters = new FormData();

  const load = async () => {
    const from = fromUtcField(String(filters.get("from") ?? ""));
    const to = fromUtcField(String(filters.get("to") ?? ""));
    const page = await generation.listLedgerEntries({
      limit: 50, pageToken, source: LedgerEntrySource.TEXT_CALL, types: [LedgerEntryType.CHARGE, LedgerEntryType.RELEASE],
      model: String(filters.get("model") ?? ""), keyId: String(filters.get("key") ?? "").trim(),
      ...(from ? { from: timestampFromDate(from) } : {}), ...(to ? { to: timestampFromDate(to) } : {}),
    });
    rows.append(...page.entries.map(row));
    pageToken = page.nextPageToken;
    older.hidden = pageToken === "";
    if (rows.childElementCount === 0 && pageToken === "") rows.append(h("tr", {}, h("td", { colspan: HEADERS.length, class: "hint" }, "No text calls.")));
  };
  older.addEventListener("click", () => void act(older, load));

  const keyChoices = h("datalist", { id: "activity-keys" }, ...keys.map((key) => h("option", { value: key.keyId })));
  const filterForm = form("Filter text calls", [
    h("div", { class: "row" },
      field("Model", h("select", { name: "model" }, h("option", { value: "" }, "any"), ...models.map((m) => h("option", { value: m.id }, m.id)))),
      field("Key", input("key", { list: "activity-keys", autocomplete: "off", placeholder: "any" }), "A key id, or the owner token's."),
      utcField("From", "from"),
      utcField("Before", "to")),
    keyChoices,
  ], "Apply filters", async (data) => {
    filters = data;
    pageToken = "";
    rows.replaceChildren();
    await load();
  });
  await load();

  return section("Synchronous text calls",
    h("p", {}, "Each text call answered at once (generateContent, streamed or not, and chat completions), from the statement: ",
      "what it was charged for the tokens it used, or why it was not charged. Text jobs are under Jobs. A call still running is not listed yet."),
    filterForm,
    h("div", { class: "scroll", role: "region", "aria-label": "Text calls", tabindex: 0 },
      h("table", { "data-testid": "text-calls" }, h("caption", {}, "Text calls, newest first"),
        h("thead", {}, h("tr", {}, ...HEADERS.map((t) => h("th", { scope: "col" }, t)))),
        rows)),
    older);
}

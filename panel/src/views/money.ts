import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { LedgerEntry, UsageRow } from "../../../gen/generation/v1/money_pb.js";
import { LedgerEntryType, UsageGrouping } from "../../../gen/generation/v1/money_pb.js";
import { account, downloadCsv, generation } from "../rpc.js";
import { act, downloadButton, h, section, table, toCents, usd, utc } from "../ui.js";
import { ownerSettingsForm, showLowBalance } from "./account-settings.js";

const ENTRY: Record<number, string> = {
  [LedgerEntryType.CREDIT]: "credit", [LedgerEntryType.HOLD]: "hold", [LedgerEntryType.CHARGE]: "charge", [LedgerEntryType.RELEASE]: "release",
  [LedgerEntryType.ADJUSTMENT]: "adjustment",
};

/** A statement entry's type, with the operator's reason under an adjustment. */
export function entryType(entry: LedgerEntry, names: Record<number, string>): HTMLElement {
  const name = names[entry.type] ?? String(entry.type);
  return entry.adjustmentReason
    ? h("span", {}, name, h("br"), h("small", { class: "hint", "data-testid": "adjustment-reason" }, entry.adjustmentReason))
    : h("span", {}, name);
}

/** Exact decimal text → an integer of 10⁻⁹ dollars (no float ever holds money; only the bar's pixel length is a number). */
function nanos(amount: string): bigint {
  const [whole = "0", fraction = ""] = amount.replace(/^-/, "").split(".");
  return BigInt(whole) * 1_000_000_000n + BigInt((fraction + "000000000").slice(0, 9));
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag: string, attributes: Record<string, string | number>, text?: string): SVGElement {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** A bar chart of spend per group, with the same figures in a table for screen readers and exact reading. */
export function spendChart(title: string, rows: { label: string; spend: string; requests: bigint }[]): HTMLElement {
  const width = 640;
  const barHeight = 26;
  const labelWidth = 190;
  const max = rows.reduce((top, row) => (nanos(row.spend) > top ? nanos(row.spend) : top), 0n);
  const span = BigInt(width - labelWidth - 90);
  const label = `${title}: ${rows.map((r) => `${r.label} $${toCents(r.spend)}`).join(", ") || "no spend"}`;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${Math.max(1, rows.length) * barHeight + 8}`, role: "img", "aria-label": label, class: "chart" });
  rows.forEach((row, i) => {
    const y = i * barHeight + 4;
    const length = max > 0n ? Number((nanos(row.spend) * span) / max) : 0;
    chart.append(
      svg("text", { x: 0, y: y + 17, class: "chart-label" }, row.label),
      svg("rect", { x: labelWidth, y, width: Math.max(1, length), height: barHeight - 8, class: "chart-bar" }),
      svg("text", { x: labelWidth + length + 6, y: y + 17, class: "chart-value" }, `$${toCents(row.spend)}`),
    );
  });
  return h("figure", { class: "chart-figure" }, h("figcaption", {}, title),
    rows.length === 0 ? h("p", { class: "hint" }, "No settled charges in the last 30 days.") : chart,
    h("details", {}, h("summary", {}, "As a table"),
      table(["Group", "Requests", "Spend"], rows.map((r) => [r.label, String(r.requests), usd(r.spend)]), title)));
}

const usageRows = (rows: UsageRow[]) =>
  rows.map((row) => ({ label: row.group.value ?? "", spend: row.spend, requests: row.requests }));

export async function moneyView(): Promise<HTMLElement> {
  const [got, byDay, byModel] = await Promise.all([
    account.getAccount({}),
    generation.getUsage({ groupBy: UsageGrouping.DAY }),
    generation.getUsage({ groupBy: UsageGrouping.MODEL }),
  ]);
  const { balance } = got;
  const settings = { name: got.name, lowBalanceThreshold: got.lowBalanceThreshold, lowBalance: got.lowBalance, available: balance?.available };
  showLowBalance(settings);
  const entries = h("tbody", {});
  const older = h("button", { type: "button", hidden: true }, "Older entries");
  let pageToken = "";
  const addEntries = (list: LedgerEntry[]) => {
    for (const entry of list) {
      entries.append(h("tr", {},
        h("td", {}, utc(timestampDate(entry.createdAt!))),
        h("td", {}, entryType(entry, ENTRY)),
        h("td", { class: "num" }, usd(entry.amount)),
        h("td", { class: "num" }, usd(entry.balanceAfter)),
        h("td", { class: "num" }, usd(entry.reservedChange)),
        h("td", {}, entry.model ?? ""),
        h("td", {}, entry.jobId ? h("a", { href: `#/jobs/${entry.jobId}` }, entry.jobId.slice(0, 8)) : ""),
        h("td", {}, entry.keyId ?? "")));
    }
  };
  const load = async () => {
    const page = await generation.listLedgerEntries({ limit: 20, pageToken });
    addEntries(page.entries);
    pageToken = page.nextPageToken;
    older.hidden = pageToken === "";
  };
  older.addEventListener("click", () => void act(older, load));
  await load();
  const figure = (label: string, value: string | undefined, id: string) =>
    h("div", { class: "figure" }, h("span", { class: "label", id }, label), usd(value, { class: "amount", "aria-labelledby": id, "data-testid": id }));
  return h("div", {},
    section("Balance", h("div", { class: "figures" },
      figure("Balance", balance?.balance, "balance"), figure("Reserved", balance?.reserved, "reserved"), figure("Available", balance?.available, "available")),
    h("p", { class: "hint" }, "Available = balance − reserved: money held for jobs that have not finished yet is reserved.")),
    section("Account settings", ownerSettingsForm(settings, showLowBalance)),
    section("Usage, last 30 days",
      h("div", { class: "charts" }, spendChart("Spend per day", usageRows(byDay.rows)), spendChart("Spend per model", usageRows(byModel.rows)))),
    section("Statement",
      h("p", {}, "Every movement of the account's money, newest first. The amounts add up to the balance; the reserved changes add up to what is reserved."),
      h("div", { class: "actions" },
        downloadButton("Download the statement (CSV)", () => "/api/v1/ledger", downloadCsv),
        downloadButton("Download usage by day (CSV)", () => "/api/v1/usage?group_by=day", downloadCsv)),
      h("div", { class: "scroll", role: "region", "aria-label": "Statement", tabindex: 0 },
        h("table", { "data-testid": "statement" }, h("caption", {}, "Statement"),
          h("thead", {}, h("tr", {}, ...["When (UTC)", "Type", "Amount", "Balance after", "Reserved change", "Model", "Job", "Key"].map((t) => h("th", { scope: "col" }, t)))),
          entries)),
      older));
}

import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { AuditEvent, ListAuditEventsRequest } from "../../../gen/generation/v1/admin_service_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListAuditEventsRequestSchema } from "../../../gen/generation/v1/admin_service_pb.js";
import { account, admin } from "../rpc.js";
import { act, field, form, fromUtcField, h, input, section, utc, utcField } from "../ui.js";

type Query = MessageInitShape<typeof ListAuditEventsRequestSchema>;
type Lister = (query: Query) => Promise<{ events: AuditEvent[]; nextPageToken: string }>;

const HEADERS = ["When (UTC)", "Kind", "Actor", "Client address", "Account", "Subject", "Before → after"];

/** Before and after as recorded (JSON text), side by side. */
function change(event: AuditEvent): HTMLElement {
  return h("span", { class: "change" }, h("code", {}, event.before || "—"), " → ", h("code", {}, event.after || "—"));
}

function row(event: AuditEvent): HTMLTableRowElement {
  return h("tr", {},
    ...[utc(timestampDate(event.createdAt!)), h("code", {}, event.kind), event.actor, event.clientAddress || "—",
      event.accountId ? h("code", {}, event.accountId) : "—", event.subject || "—", change(event)].map((cell) => h("td", {}, cell)));
}

/**
 * An audit trail, newest first, paged, filtered by actor, kind, UTC time range and (for the operator, when no
 * account is fixed) account. `list` is AdminService.ListAuditEvents or the owner's AccountService.ListAuditEvents.
 */
export async function auditTrail(list: Lister, options: { accountId?: string; chooseAccount: boolean; caption: string }): Promise<HTMLElement> {
  const rows = h("tbody", {});
  const older = h("button", { type: "button", hidden: true }, "Older entries");
  let pageToken = "";
  let filters = new FormData();
  const text = (name: string) => String(filters.get(name) ?? "").trim();

  const load = async () => {
    const from = fromUtcField(text("from"));
    const to = fromUtcField(text("to"));
    const page = await list({
      limit: 50, pageToken, accountId: options.accountId ?? text("account"), actor: text("actor"), kind: text("kind"),
      ...(from ? { from: timestampFromDate(from) } : {}), ...(to ? { to: timestampFromDate(to) } : {}),
    } satisfies Partial<ListAuditEventsRequest>);
    rows.append(...page.events.map(row));
    pageToken = page.nextPageToken;
    older.hidden = pageToken === "";
    if (rows.childElementCount === 0 && pageToken === "") rows.append(h("tr", {}, h("td", { colspan: HEADERS.length, class: "hint" }, "No entries.")));
  };
  older.addEventListener("click", () => void act(older, load));
  const filterForm = form(`Filter ${options.caption.toLowerCase()}`, [
    h("div", { class: "row" },
      options.chooseAccount ? field("Account", input("account", { autocomplete: "off", placeholder: "any", spellcheck: false }), "An account id.") : "",
      field("Actor", input("actor", { autocomplete: "off", placeholder: "any", spellcheck: false }), "admin, owner:<account id> or key:<key id>."),
      field("Kind", input("kind", { autocomplete: "off", placeholder: "any", spellcheck: false }), "e.g. model.paused, webhook.set."),
      utcField("From", "from"),
      utcField("Before", "to")),
  ], "Apply filters", async (data) => {
    filters = data;
    pageToken = "";
    rows.replaceChildren();
    await load();
  });
  await load();
  return h("div", {},
    h("p", { class: "hint" }, "Every recorded change, newest first: who made it, from which address, and the values before and after. With no time range, the last 31 days."),
    filterForm,
    h("div", { class: "scroll", role: "region", "aria-label": options.caption, tabindex: 0 },
      h("table", { "data-testid": "audit" }, h("caption", {}, `${options.caption}, newest first`),
        h("thead", {}, h("tr", {}, ...HEADERS.map((t) => h("th", { scope: "col" }, t)))),
        rows)),
    older);
}

export const operatorAuditView = async () =>
  section("Audit trail", await auditTrail((query) => admin.listAuditEvents(query), { chooseAccount: true, caption: "Audit entries" }));

export const ownerAuditView = async () =>
  section("Changes to this account", await auditTrail((query) => account.listAuditEvents({ query }), { chooseAccount: false, caption: "Audit entries" }));

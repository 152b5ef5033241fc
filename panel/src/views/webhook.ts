import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { WebhookDelivery } from "../../../gen/generation/v1/webhook_pb.js";
import { WebhookDeliveryState } from "../../../gen/generation/v1/webhook_pb.js";
import { account, admin } from "../rpc.js";
import { act, field, form, h, input, say, section, table } from "../ui.js";

const STATE: Record<number, string> = {
  [WebhookDeliveryState.PENDING]: "retrying", [WebhookDeliveryState.DELIVERED]: "delivered", [WebhookDeliveryState.EXHAUSTED]: "failed",
};

/** Deliveries with their tries; `redeliver` re-sends one. */
export function deliveriesTable(deliveries: WebhookDelivery[], caption: string, redeliver: (messageId: string) => Promise<void>, withAccount = false): HTMLElement {
  return table(
    ["Message", ...(withAccount ? ["Account"] : []), "About", "State", "Tries (status codes)", "Last try (UTC)", ""],
    deliveries.map((delivery) => {
      const again = h("button", { type: "button", "aria-label": `Redeliver ${delivery.messageId}` }, "Redeliver");
      again.addEventListener("click", () => void act(again, () => redeliver(delivery.messageId)));
      const last = delivery.attempts.at(-1);
      return [
        h("code", {}, delivery.messageId),
        ...(withAccount ? [h("code", {}, delivery.accountId)] : []),
        delivery.jobId ? h("a", { href: `#/jobs/${delivery.jobId}` }, `job ${delivery.jobId.slice(0, 8)}`) : "test event",
        h("span", { class: delivery.state === WebhookDeliveryState.EXHAUSTED ? "badge warn" : "badge" }, STATE[delivery.state] ?? ""),
        delivery.attempts.map((a) => (a.statusCode ? String(a.statusCode) : a.error || "no answer")).join(", "),
        last?.time ? timestampDate(last.time).toISOString().replace("T", " ").slice(0, 19) : "—",
        again,
      ];
    }),
    caption,
  );
}

export async function webhookView(refresh: () => void): Promise<HTMLElement> {
  const [{ webhook }, { deliveries }] = await Promise.all([account.getAccountWebhook({}), account.listWebhookDeliveries({ limit: 50 })]);
  const secret = h("output", { "data-testid": "webhook-secret", "aria-label": "Signing secret", hidden: true }, webhook?.secret ?? "");
  const show = h("button", { type: "button", "aria-expanded": "false" }, "Show the signing secret");
  show.addEventListener("click", () => {
    secret.hidden = !secret.hidden;
    show.setAttribute("aria-expanded", String(!secret.hidden));
    show.textContent = secret.hidden ? "Show the signing secret" : "Hide the signing secret";
  });
  const rotate = h("button", { type: "button", class: "danger" }, "Rotate the secret");
  rotate.addEventListener("click", () => {
    if (!confirm("Make a new signing secret? Requests from now on are signed with it; update your receiver.")) return;
    void act(rotate, async () => {
      await account.rotateWebhookSecret({});
      say("A new signing secret is in use.");
      refresh();
    });
  });
  const test = h("button", { type: "button" }, "Send a test event");
  test.addEventListener("click", () => void act(test, async () => {
    const { delivery } = await account.sendTestWebhook({});
    const status = delivery?.attempts.at(-1)?.statusCode;
    say(status ? `Test event sent: your receiver answered ${status}.` : `Test event not delivered: ${delivery?.attempts.at(-1)?.error ?? "no answer"}.`,
      delivery?.state === WebhookDeliveryState.DELIVERED ? "ok" : "error");
    refresh();
  }));
  return h("div", {},
    section("Endpoint",
      h("p", {}, "Finished jobs are reported to this URL (a job's own callback_url wins), signed per Standard Webhooks with the secret below. Failed deliveries are retried."),
      form("Webhook URL", [field("URL", input("url", { type: "url", value: webhook?.url ?? "", placeholder: "https://example.com/hooks", autocomplete: "off" }),
        "Empty: no account-wide webhook.")], "Save URL", async (data) => {
        await account.setAccountWebhook({ url: String(data.get("url") ?? "").trim() });
        say("Webhook URL saved.");
        refresh();
      }),
      h("div", { class: "actions" }, show, rotate, test), secret),
    section("Recent deliveries",
      deliveriesTable(deliveries, "Recent deliveries, most recent first", async (messageId) => {
        const { delivery } = await account.redeliverWebhook({ messageId });
        say(`Redelivered ${messageId}: ${delivery?.attempts.at(-1)?.statusCode || delivery?.attempts.at(-1)?.error}.`);
        refresh();
      })));
}

/** The operator's dead letters: job deliveries of any account that exhausted their retries. */
export async function deadLettersView(refresh: () => void): Promise<HTMLElement> {
  const { deliveries } = await admin.listWebhookDeadLetters({ limit: 100 });
  return section("Webhook dead letters",
    h("p", {}, "Job deliveries whose every retry failed. Redeliver one once its receiver works again; it then leaves this list."),
    deliveriesTable(deliveries, "Dead letters, most recent first", async (messageId) => {
      const { delivery } = await admin.redeliverDeadLetter({ messageId });
      say(`Redelivered ${messageId}: ${delivery?.attempts.at(-1)?.statusCode || delivery?.attempts.at(-1)?.error}.`);
      refresh();
    }, true));
}

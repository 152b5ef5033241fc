import { useCsrfToken } from "./rpc.js";
import { currentSession, signIn, signOut, type Session } from "./session.js";
import { act, clearNotice, field, failureText, form, h, input, say, takePendingNotice } from "./ui.js";
import { jobsView, playgroundView } from "./views/jobs.js";
import { refreshLowBalance, showLowBalance } from "./views/account-settings.js";
import { keysView } from "./views/keys.js";
import { moneyView } from "./views/money.js";
import { accountView, accountsView } from "./views/accounts.js";
import { operatorAuditView, ownerAuditView } from "./views/audit.js";
import { controlsView } from "./views/operator.js";
import { pricesView } from "./views/prices.js";
import { textActivityView } from "./views/text-activity.js";
import { deadLettersView, webhookView } from "./views/webhook.js";

interface Screen {
  readonly path: string;
  readonly title: string;
  /** `rest`: what follows the screen's path in the address (a job id). */
  readonly render: (refresh: () => void, rest: string | undefined) => HTMLElement | Promise<HTMLElement>;
}

const OWNER: readonly Screen[] = [
  { path: "money", title: "Money", render: () => moneyView() },
  { path: "jobs", title: "Jobs", render: (_refresh, jobId) => jobsView(jobId) },
  { path: "playground", title: "Text playground", render: () => playgroundView() },
  { path: "text-activity", title: "Text activity", render: () => textActivityView() },
  { path: "keys", title: "API keys", render: () => keysView() },
  { path: "webhook", title: "Webhook", render: (refresh) => webhookView(refresh) },
  { path: "audit", title: "Audit", render: () => ownerAuditView() },
  { path: "prices", title: "Prices", render: () => pricesView() },
];

const OPERATOR: readonly Screen[] = [
  { path: "accounts", title: "Accounts", render: (_refresh, accountId) => (accountId ? accountView(accountId, () => void boot()) : accountsView()) },
  { path: "controls", title: "Pauses, prices, routes", render: (refresh) => controlsView(refresh) },
  { path: "dead-letters", title: "Dead letters", render: (refresh) => deadLettersView(refresh) },
  { path: "audit", title: "Audit", render: () => operatorAuditView() },
  { path: "prices", title: "Prices", render: () => pricesView() },
];

const main = document.getElementById("main")!;
const nav = document.getElementById("nav")!;
const who = document.getElementById("who")!;
let screens: readonly Screen[] = [];

async function show(): Promise<void> {
  const [path, rest] = location.hash.replace(/^#\/?/, "").split("/") as [string, string | undefined];
  const screen = screens.find((s) => s.path === path) ?? screens[0]!;
  for (const link of nav.querySelectorAll("a")) {
    if (link.getAttribute("href") === `#/${screen.path}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${screen.title} · Generation service`;
  // The owner's low-balance banner is read again on every screen (sign-in, navigation, after a money change).
  if (screens === OWNER) void refreshLowBalance().catch(() => showLowBalance(undefined));
  try {
    main.replaceChildren(h("h1", {}, screen.title), await screen.render(() => void show(), rest));
  } catch (error) {
    main.replaceChildren(h("h1", {}, screen.title), h("p", { role: "alert" }, failureText(error)));
  }
}

function signInView(): HTMLElement {
  return h("div", { class: "signin" },
    h("h1", {}, "Sign in"),
    h("p", {}, "Account owners sign in with the owner token their operator issued. The operator signs in with the admin token (the service prints it at start when ADMIN_TOKEN is not set)."),
    form("Sign in", [field("Owner token or admin token", input("token", { type: "password", required: true, autocomplete: "off", spellcheck: false }),
      "The token is exchanged for a session cookie and not kept by this page.")], "Sign in", async (data) => {
      await signIn(String(data.get("token")));
      await boot();
    }));
}

function shell(session: Session): void {
  clearNotice();
  screens = session.role === "owner" ? OWNER : OPERATOR;
  if (screens !== OWNER) showLowBalance(undefined);
  useCsrfToken(session.csrf_token);
  nav.replaceChildren(...screens.map((s) => h("a", { href: `#/${s.path}` }, s.title)));
  const out = h("button", { type: "button", class: "link" }, "Sign out");
  out.addEventListener("click", () => void act(out, async () => {
    await signOut();
    await boot();
    say("Signed out.");
  }));
  who.replaceChildren(session.role === "owner" ? `Owner of ${session.account_id}` : "Operator", " ", out);
}

async function boot(): Promise<void> {
  const session = await currentSession();
  if (!session) {
    screens = [];
    showLowBalance(undefined);
    useCsrfToken("");
    nav.replaceChildren();
    who.replaceChildren();
    main.replaceChildren(signInView());
    main.querySelector("input")?.focus();
    return;
  }
  shell(session);
  if (!screens.some((s) => location.hash.startsWith(`#/${s.path}`))) history.replaceState(null, "", `#/${screens[0]!.path}`);
  await show();
  main.focus();
}

// A new screen starts without the last one's banner; actions within a screen keep theirs (they re-render without a hash change).
window.addEventListener("hashchange", () => {
  clearNotice();
  const notice = takePendingNotice();
  void show().then(() => notice && say(notice));
});
void boot();

import { ConnectError } from "@connectrpc/connect";
import { describeFailure } from "./rpc.js";

type Child = Node | string | number | false | null | undefined;
type Attributes = Record<string, string | number | boolean | EventListener | undefined>;

/** A DOM element: attributes (on… are listeners, false/undefined are left out) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

let fieldIds = 0;

/** A labelled input (or select/textarea passed in), with an optional hint tied by aria-describedby. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: string): HTMLElement {
  const id = control.id || `f${++fieldIds}`;
  control.id = id;
  const hintElement = hint ? h("small", { id: `${id}-hint`, class: "hint" }, hint) : undefined;
  if (hintElement) control.setAttribute("aria-describedby", hintElement.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintElement);
}

/** An exact decimal amount to the cent, rounded half away from zero ("24.8658345" → "24.87"), as text: no float touches it. */
export function toCents(amount: string): string {
  const match = /^(-?)(\d*)(?:\.(\d*))?$/.exec(amount.trim());
  if (!match) return amount;
  const [, sign = "", whole = "", fraction = ""] = match;
  const hundredths = BigInt(whole || "0") * 100n + BigInt((fraction + "00").slice(0, 2)) + (Number(fraction[2] ?? "0") >= 5 ? 1n : 0n);
  const text = `${hundredths / 100n}.${String(hundredths % 100n).padStart(2, "0")}`;
  return hundredths === 0n ? text : `${sign}${text}`;
}

/** An amount shown to the cent, the exact value on hover (title); `suffix` follows the amount in both. */
export function usd(amount: string | undefined, attributes: Attributes = {}, suffix = ""): HTMLSpanElement {
  const exact = amount ?? "0";
  const cents = toCents(exact);
  const text = cents.startsWith("-") ? `-$${cents.slice(1)}` : `$${cents}`;
  const full = exact.startsWith("-") ? `-$${exact.slice(1)}` : `$${exact}`;
  return h("span", { class: "usd", title: `${full}${suffix}`, ...attributes }, `${text}${suffix}`);
}

/** An instant as the panel shows it everywhere: UTC, to the second ("2026-12-03 14:05:09"). */
export function utc(date: Date | undefined): string {
  return date ? date.toISOString().replace("T", " ").slice(0, 19) : "—";
}

/** A datetime-local field's value read as UTC (the panel's filters are in UTC, as its tables), whatever the browser's zone. */
export function fromUtcField(value: string): Date | undefined {
  if (value === "") return undefined;
  const date = new Date(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** A labelled UTC date-and-time field (to the second). */
export function utcField(label: string, name: string): HTMLElement {
  return field(`${label} (UTC)`, input(name, { type: "datetime-local", step: 1 }), "UTC, as the times in the table.");
}

/** Clears the notice area (a new screen starts without the last one's banner). */
export function clearNotice(): void {
  const notice = document.getElementById("notice")!;
  notice.setAttribute("role", "status");
  notice.className = "notice";
  notice.textContent = "";
}

/** Says something in the live region (screen readers hear it); errors are alerts. */
export function say(text: string, kind: "ok" | "error" = "ok"): void {
  const notice = document.getElementById("notice")!;
  notice.setAttribute("role", kind === "error" ? "alert" : "status");
  notice.className = `notice ${kind}`;
  notice.textContent = text;
}

/** A failed call as the user reads it: "503 model_paused: the model … is paused". */
export function failureText(error: unknown): string {
  if (error instanceof Error && !(error instanceof ConnectError)) return error.message;
  const { status, reason, message } = describeFailure(error);
  return `${status ? `${status} ` : ""}${reason}: ${message}`;
}

/** Runs an action of a button: busy while it runs, its failure said. */
export async function act(button: HTMLButtonElement | undefined, work: () => Promise<void>): Promise<void> {
  if (button) button.disabled = true;
  try {
    await work();
  } catch (error) {
    say(failureText(error), "error");
  } finally {
    if (button) button.disabled = false;
  }
}

export function table(headers: string[], rows: Child[][], caption: string): HTMLElement {
  if (rows.length === 0) rows = [[h("span", { class: "hint" }, "None yet.")]];
  return h("div", { class: "scroll", role: "region", "aria-label": caption, tabindex: 0 },
    h("table", {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, ...headers.map((text) => h("th", { scope: "col" }, text)))),
      h("tbody", {}, ...rows.map((cells) => h("tr", {}, ...cells.map((cell) => h("td", {}, cell)))))));
}

export function section(title: string, ...children: Child[]): HTMLElement {
  return h("section", { "aria-labelledby": `s-${title.replace(/\W+/g, "-")}` }, h("h2", { id: `s-${title.replace(/\W+/g, "-")}` }, title), ...children);
}

/** A form whose submit runs `work` (Enter works; the submit button is busy meanwhile). */
export function form(label: string, children: Child[], submitText: string, work: (data: FormData) => Promise<void>): HTMLFormElement {
  const submit = h("button", { type: "submit" }, submitText);
  const element = h("form", { "aria-label": label }, ...children, submit);
  element.addEventListener("submit", (event) => {
    event.preventDefault();
    void act(submit, () => work(new FormData(element)));
  });
  return element;
}

export const input = (name: string, attributes: Attributes = {}) => h("input", { name, ...attributes });

let pendingNotice: string | undefined;

/** Moves to another screen, saying `notice` there (a new screen otherwise starts without a banner). */
export function navigate(hash: string, notice?: string): void {
  pendingNotice = notice;
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}

/** The notice a navigation asked for, once. */
export function takePendingNotice(): string | undefined {
  const notice = pendingNotice;
  pendingNotice = undefined;
  return notice;
}

/** A button that downloads a CSV export (see downloadCsv). */
export function downloadButton(label: string, path: () => string, download: (path: string) => Promise<string>): HTMLButtonElement {
  const button = h("button", { type: "button" }, label);
  button.addEventListener("click", () => void act(button, async () => say(`Downloaded ${await download(path())}.`)));
  return button;
}

import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema, type FieldMask } from "@bufbuild/protobuf/wkt";
import { account } from "../rpc.js";
import { act, field, form, h, input, say, usd } from "../ui.js";

/** What an account's settings form shows and what a save answers: its name, the alert threshold, and whether it is low now. */
export interface AccountSettings {
  readonly name: string;
  readonly lowBalanceThreshold?: string | undefined;
  readonly lowBalance: boolean;
  readonly available?: string | undefined;
}

/** A change of settings: the fields named in the mask ("name", "low_balance_threshold"; an empty threshold removes the alert). */
export type SaveSettings = (change: { name: string; lowBalanceThreshold: string; updateMask: FieldMask }) => Promise<AccountSettings>;

const mask = (paths: string[]) => create(FieldMaskSchema, { paths });

/**
 * The settings of an account (AdminService.UpdateAccount for the operator, AccountService.UpdateAccount for the
 * owner): rename, set the low-balance threshold, clear it. Only the fields changed are sent.
 */
export function settingsForm(label: string, current: AccountSettings, save: SaveSettings, saved: (settings: AccountSettings) => void): HTMLElement {
  let shown = current;
  const state = h("p", { class: "hint", "data-testid": "threshold-state" });
  const showState = () => state.replaceChildren(...(shown.lowBalanceThreshold
    ? ["Alert below ", usd(shown.lowBalanceThreshold), shown.lowBalance ? " — available is below it now." : " — available is above it."]
    : ["No low-balance alert is set."]));
  showState();
  const name = input("name", { required: true, maxlength: 200, autocomplete: "off", value: current.name });
  const threshold = input("threshold", { inputmode: "decimal", autocomplete: "off", placeholder: "none", value: current.lowBalanceThreshold ?? "" });
  const apply = (settings: AccountSettings, message: string) => {
    shown = settings;
    name.value = settings.name;
    threshold.value = settings.lowBalanceThreshold ?? "";
    showState();
    clear.hidden = !settings.lowBalanceThreshold;
    saved(settings);
    say(message);
  };
  const clear = h("button", { type: "button", class: "danger", hidden: !current.lowBalanceThreshold }, "Clear the threshold");
  clear.addEventListener("click", () => void act(clear, async () =>
    apply(await save({ name: "", lowBalanceThreshold: "", updateMask: mask(["low_balance_threshold"]) }), "Low-balance alert removed.")));
  const element = form(label, [
    field("Account name", name),
    field("Low-balance threshold (USD)", threshold, "A banner (and one balance.low webhook event) when available falls below it. Empty: no alert."),
    state,
  ], "Save settings", async () => {
    const paths = [
      ...(name.value.trim() !== shown.name ? ["name"] : []),
      ...(threshold.value.trim() !== (shown.lowBalanceThreshold ?? "") ? ["low_balance_threshold"] : []),
    ];
    if (paths.length === 0) return say("Nothing changed.");
    apply(await save({ name: name.value.trim(), lowBalanceThreshold: threshold.value.trim(), updateMask: mask(paths) }), "Settings saved.");
  });
  element.append(clear);
  return element;
}

/** The owner's settings form (AccountService.UpdateAccount). */
export function ownerSettingsForm(current: AccountSettings, saved: (settings: AccountSettings) => void): HTMLElement {
  return settingsForm("Account settings", current, async (change) => {
    const { account: changed } = await account.updateAccount(change);
    return { name: changed?.name ?? "", lowBalanceThreshold: changed?.lowBalanceThreshold, lowBalance: changed?.lowBalance ?? false, available: changed?.balance?.available };
  }, saved);
}

/** The low-balance banner above every owner screen, while available is below the threshold; hidden otherwise. */
export function showLowBalance(settings: AccountSettings | undefined): void {
  const banner = document.getElementById("low-balance")!;
  if (!settings?.lowBalance || !settings.lowBalanceThreshold) {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  const said = `${settings.available}/${settings.lowBalanceThreshold}`;
  if (!banner.hidden && banner.dataset.said === said) return; // unchanged: not announced again on every screen
  banner.dataset.said = said;
  banner.hidden = false;
  banner.replaceChildren(h("strong", {}, "Low balance: "), usd(settings.available), " available, below your alert threshold of ",
    usd(settings.lowBalanceThreshold), ". New jobs stop when it runs out: ask your operator for credit.");
}

/** Reads the owner's account (GetAccount) and shows or hides the banner. */
export async function refreshLowBalance(): Promise<void> {
  const got = await account.getAccount({});
  showLowBalance({ name: got.name, lowBalanceThreshold: got.lowBalanceThreshold, lowBalance: got.lowBalance, available: got.balance?.available });
}

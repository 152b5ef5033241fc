import { account } from "../rpc.js";
import { h, section } from "../ui.js";

export async function accountView(): Promise<HTMLElement> {
  const { accountId, balance } = await account.getAccount({});
  const figure = (label: string, value: string | undefined, id: string) =>
    h("div", { class: "figure" }, h("span", { class: "label", id }, label), h("span", { class: "amount", "aria-labelledby": id, "data-testid": id }, `$${value ?? "0"}`));
  return section("Balance",
    h("p", {}, "Account ", h("code", {}, accountId)),
    h("div", { class: "figures" },
      figure("Balance", balance?.balance, "balance"),
      figure("Reserved", balance?.reserved, "reserved"),
      figure("Available", balance?.available, "available")),
    h("p", { class: "hint" }, "Available = balance − reserved: money held for jobs that have not finished yet is reserved."));
}

import type { Balance } from "../../../gen/generation/v1/money_pb.js";
import { formatMoney } from "../../domain/money.js";
import type { BalanceSnapshot } from "../../ports/ledger.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { BalanceSchema } from "../../../gen/generation/v1/money_pb.js";

/** available is derived from the same snapshot, so balance − reserved = available exactly. */
export function balanceView(snapshot: BalanceSnapshot): MessageInitShape<typeof BalanceSchema> & Partial<Balance> {
  return {
    balance: formatMoney(snapshot.balance),
    reserved: formatMoney(snapshot.reserved),
    available: formatMoney(snapshot.balance - snapshot.reserved),
    currency: "USD",
  };
}

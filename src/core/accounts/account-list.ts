import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ListAccountsRequest } from "../../../gen/generation/v1/admin_service_pb.js";
import { accountSearch } from "../../domain/accounts/account-listing.js";
import { badRequest } from "../../domain/errors/domain-error.js";
import { checkLimit } from "../../domain/jobs/job-list.js";
import { checkTextLength, MAX_NAME_CHARACTERS } from "../../domain/validation/text-fields.js";
import type { AccountCursor, Ledger } from "../../ports/ledger.js";
import { balanceView } from "../services/balance-view.js";

/** The page token: the last account's sort key and id, as base64url JSON (opaque to clients). */
const tokenOf = (cursor: AccountCursor) => Buffer.from(JSON.stringify([cursor.key, cursor.accountId])).toString("base64url");

function cursorOf(token: string): AccountCursor | undefined {
  if (token === "") return undefined;
  try {
    const [key, accountId] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown[];
    if (typeof key === "string" && typeof accountId === "string") return { key, accountId };
  } catch {
    // Answered below, as any token that is not ours.
  }
  throw badRequest("invalid_page_token", "page_token is not a token of this list", { field: "page_token" });
}

/**
 * The operator's account list (AdminService.ListAccounts): `q` starting "acct_" is an id prefix, anything else a
 * case-insensitive prefix of the name; a page is one bounded range of the store's listing index (see the adapters).
 */
export async function accountList(deps: { readonly ledger: Pick<Ledger, "listAccounts"> }, request: ListAccountsRequest) {
  checkTextLength("q", request.q, MAX_NAME_CHARACTERS);
  const limit = checkLimit(request.limit);
  const after = cursorOf(request.pageToken);
  const page = await deps.ledger.listAccounts({ ...accountSearch(request.q), limit, ...(after ? { after } : {}) });
  return {
    accounts: page.accounts.map((account) => ({
      accountId: account.accountId, name: account.name, balance: balanceView(account), openJobs: account.openJobs,
      createdAt: timestampFromDate(account.createdAt), status: "active",
    })),
    nextPageToken: page.next ? tokenOf(page.next) : "",
  };
}

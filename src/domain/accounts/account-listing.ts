/**
 * How the operator's account list searches (issue 39): `q` starting "acct_" is an id prefix, anything else a prefix
 * of the name, compared case-insensitively through one key every store keeps beside the name.
 */
export const ACCOUNT_ID_PREFIX = "acct_";

/** The form a name is sorted and searched by: NFC, lower case (the same in every store and every process). */
export function accountNameKey(name: string): string {
  return name.normalize("NFC").toLowerCase();
}

/** What a search string asks: an id prefix or a name prefix (as its key). */
export function accountSearch(q: string): { readonly by: "id" | "name"; readonly prefix: string } {
  return q.startsWith(ACCOUNT_ID_PREFIX) ? { by: "id", prefix: q } : { by: "name", prefix: accountNameKey(q) };
}

/** The panel session: a cookie the gateway sets from a credential (POST /panel/session); the page holds only its CSRF token. */
export interface Session {
  readonly role: "owner" | "operator";
  readonly account_id: string | null;
  readonly csrf_token: string;
  readonly expire_time: string;
}

async function answer(response: Response): Promise<Session> {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body?.error?.message ?? `sign-in failed (${response.status})`);
  return body as Session;
}

/** The session of the cookie, if there is a valid one. */
export async function currentSession(): Promise<Session | undefined> {
  const response = await fetch("/panel/session", { credentials: "same-origin" });
  return response.ok ? (answer(response)) : undefined;
}

/** Exchanges an owner token or the admin token for a session cookie; the token is not kept. */
export async function signIn(token: string): Promise<Session> {
  return answer(await fetch("/panel/session", { method: "POST", credentials: "same-origin", headers: { authorization: `Bearer ${token.trim()}` } }));
}

export async function signOut(): Promise<void> {
  await fetch("/panel/session", { method: "DELETE", credentials: "same-origin" });
}

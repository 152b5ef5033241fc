// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import {
  checkCsrfToken, credentialFingerprint, csrfTokenOf, issueSession, readSession as readOnly, sameFingerprint, SESSION_LIFETIME_MS, type PanelSession,
} from "../../src/domain/accounts/panel-session.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";

const SECRET = Buffer.from("a secret of the deployment, 32 bytes long!");
const OTHER = Buffer.from("another deployment's secret, 32 bytes long");
const NOW = new Date("2026-11-24T10:00:00Z");
const OWNER: PanelSession = { role: "owner", accountId: "acct_1", credentialId: "own_1", expiresAt: new Date(NOW.getTime() + 60_000) };

/** A call of the session: read, then its CSRF token checked. */
function readSession(secret: Buffer, token: string, csrf: string | undefined, now: Date): PanelSession {
  const session = readOnly(secret, token, now);
  checkCsrfToken(secret, token, csrf);
  return session;
}

/** What each refusal tells the user to do. */
const ADVICE: Record<string, RegExp> = {
  invalid_session: /^the panel session (is not valid|cannot be read|has an unknown format); sign in again$/,
  session_expired: /^the panel session has expired; sign in again$/,
  csrf_token_mismatch: /^a panel call needs the session's CSRF token in x-csrf-token$/,
};

function refusal(run: () => unknown, message?: RegExp): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.category, "unauthenticated");
    assert.match(error.message, message ?? ADVICE[error.reason] ?? /^$/);
    return error.reason;
  }
  assert.fail("expected a refusal");
}

describe("panel sessions", () => {
  it("when a session is read back with its CSRF token before it expires, then it names the same role, account, credential and expiry, and its nonce as its id", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    assert.match(token, /^gps1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    assert.deepEqual(readSession(SECRET, token, csrfTokenOf(SECRET, token), NOW), { ...OWNER, id: "n1" });
    const operator: PanelSession = { role: "operator", accountId: "", credentialId: "", expiresAt: OWNER.expiresAt };
    const opToken = issueSession(SECRET, operator, "n2");
    assert.deepEqual(readSession(SECRET, opToken, csrfTokenOf(SECRET, opToken), NOW), { ...operator, id: "n2" });
  });

  it("when two sessions differ only by their nonce, then their tokens and CSRF tokens differ", () => {
    const a = issueSession(SECRET, OWNER, "n1");
    const b = issueSession(SECRET, OWNER, "n2");
    assert.notEqual(a, b);
    assert.notEqual(csrfTokenOf(SECRET, a), csrfTokenOf(SECRET, b));
    assert.equal(refusal(() => readSession(SECRET, a, csrfTokenOf(SECRET, b), NOW)), "csrf_token_mismatch");
  });

  it("when the CSRF token is missing or wrong, then the session is refused as csrf_token_mismatch", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    assert.equal(refusal(() => readSession(SECRET, token, undefined, NOW)), "csrf_token_mismatch");
    assert.equal(refusal(() => readSession(SECRET, token, "", NOW)), "csrf_token_mismatch");
    assert.equal(refusal(() => readSession(SECRET, token, csrfTokenOf(OTHER, token), NOW)), "csrf_token_mismatch");
    assert.equal(refusal(() => readSession(SECRET, token, `${csrfTokenOf(SECRET, token)}x`, NOW)), "csrf_token_mismatch");
  });

  it("when the session's time is up (at the instant or after), then it is refused as session_expired", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    const csrf = csrfTokenOf(SECRET, token);
    assert.equal(refusal(() => readSession(SECRET, token, csrf, OWNER.expiresAt)), "session_expired");
    assert.equal(refusal(() => readSession(SECRET, token, csrf, new Date(OWNER.expiresAt.getTime() + 1))), "session_expired");
    assert.equal(readSession(SECRET, token, csrf, new Date(OWNER.expiresAt.getTime() - 1)).accountId, "acct_1");
  });

  it("when a token was signed with another secret, altered, truncated or is not a session at all, then it is invalid_session", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    const foreign = issueSession(OTHER, OWNER, "n1");
    assert.equal(refusal(() => readSession(SECRET, foreign, csrfTokenOf(SECRET, foreign), NOW)), "invalid_session");
    const [prefix, payload, mac] = token.split(".") as [string, string, string];
    const otherAccount = Buffer.from(JSON.stringify(["owner", "acct_2", "own_1", OWNER.expiresAt.getTime(), "n1"])).toString("base64url");
    const forged = `${prefix}.${otherAccount}.${mac}`;
    assert.equal(refusal(() => readSession(SECRET, forged, csrfTokenOf(SECRET, forged), NOW)), "invalid_session");
    for (const bad of ["", "gps1", `${prefix}.${payload}`, `gps2.${payload}.${mac}`, `${token}.x`, `x${token}`, `${prefix}.${payload}.${mac.slice(1)}`]) {
      assert.equal(refusal(() => readSession(SECRET, bad, csrfTokenOf(SECRET, bad), NOW)), "invalid_session", bad);
    }
  });

  it("when a well-signed payload has another shape (wrong role, field types or count, not JSON), then it is invalid_session", () => {
    const sign = (payload: string) => {
      // What a future format or a bug could produce: a token signed by us whose fields do not read back.
      const body = `gps1.${Buffer.from(payload).toString("base64url")}`;
      return `${body}.${createHmac("sha256", SECRET).update(`panel-session\n${body}`).digest().subarray(0, 16).toString("base64url")}`;
    };
    const later = OWNER.expiresAt.getTime();
    assert.equal(refusal(() => readSession(SECRET, sign("not json"), undefined, NOW), /cannot be read/), "invalid_session");
    assert.equal(refusal(() => readSession(SECRET, sign(JSON.stringify(["admin", "a", "o", later, "n"])), undefined, NOW), /unknown format/), "invalid_session");
    for (const payload of [
      JSON.stringify(["admin", "acct_1", "own_1", later, "n"]),
      JSON.stringify(["owner", 1, "own_1", later, "n"]),
      JSON.stringify(["owner", "acct_1", null, later, "n"]),
      JSON.stringify(["owner", "acct_1", "own_1", "soon", "n"]),
      JSON.stringify(["owner", "acct_1", "own_1", 1.5, "n"]),
      JSON.stringify(["owner", "acct_1", "own_1", later, 7]),
      JSON.stringify(["owner", "acct_1", "own_1", later]),
      JSON.stringify(["owner", "acct_1", "own_1", later, "n", "extra"]),
      JSON.stringify({ role: "owner" }),
      "not json",
    ]) {
      const token = sign(payload);
      assert.equal(refusal(() => readSession(SECRET, token, csrfTokenOf(SECRET, token), NOW)), "invalid_session", payload);
    }
    const good = sign(JSON.stringify(["owner", "acct_1", "own_1", later, "n"]));
    assert.equal(readSession(SECRET, good, csrfTokenOf(SECRET, good), NOW).credentialId, "own_1", "the same signing reads a good payload");
  });

  it("when only the session is read (to hand out its CSRF token), then no CSRF token is needed, and a bad session is still refused", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    assert.deepEqual(readOnly(SECRET, token, NOW), { ...OWNER, id: "n1" });
    assert.equal(refusal(() => readOnly(OTHER, token, NOW)), "invalid_session");
    assert.equal(refusal(() => readOnly(SECRET, token, OWNER.expiresAt)), "session_expired");
    assert.equal(refusal(() => checkCsrfToken(SECRET, token, null)), "csrf_token_mismatch");
  });

  it("when a CSRF token is made, then it is the session's MAC under its own label, which every process of a deployment computes alike", () => {
    const token = issueSession(SECRET, OWNER, "n1");
    const expected = createHmac("sha256", SECRET).update(`panel-csrf\n${token}`).digest().subarray(0, 16).toString("base64url");
    assert.equal(csrfTokenOf(SECRET, token), expected);
    assert.notEqual(csrfTokenOf(SECRET, token), token.slice(token.lastIndexOf(".") + 1), "never the session's own signature");
  });

  it("when a session lasts its full lifetime, then that is twelve hours", () => {
    assert.equal(SESSION_LIFETIME_MS, 12 * 3600 * 1000);
  });

  it("when a credential is fingerprinted, then the same credential under the same secret matches and another credential or secret does not, and the credential is not in it", () => {
    const admin = credentialFingerprint(SECRET, "the-admin-token");
    assert.equal(sameFingerprint(admin, credentialFingerprint(SECRET, "the-admin-token")), true);
    assert.equal(sameFingerprint(admin, credentialFingerprint(SECRET, "another-admin-token")), false);
    assert.equal(sameFingerprint(admin, credentialFingerprint(OTHER, "the-admin-token")), false);
    assert.equal(admin.includes("the-admin-token"), false);
    assert.notEqual(admin, csrfTokenOf(SECRET, "the-admin-token"), "a fingerprint is no CSRF token of the same text");
  });
});

import { it } from "node:test";
import assert from "node:assert/strict";
import type { PanelSessionRecord, PanelSessionStore } from "../../src/ports/panel-session-store.js";

/** What every PanelSessionStore does: records by id, revocation (one, or all of a credential), and the open ones newest first. */
export function panelSessionContract(open: () => Promise<PanelSessionStore>, unique: () => string): void {
  // Real time: Cassandra keeps each row for the session's remaining life.
  const base = Date.now();
  const session = (id: string, credentialId: string, createdMinutesAgo: number, overrides: Partial<PanelSessionRecord> = {}): PanelSessionRecord => ({
    sessionId: id,
    role: credentialId === "" ? "operator" : "owner",
    accountId: credentialId === "" ? "" : `acct_${credentialId}`,
    credentialId,
    credentialFingerprint: `fp_${credentialId}`,
    createdAt: new Date(base - createdMinutesAgo * 60_000),
    expiresAt: new Date(base + 3_600_000 - createdMinutesAgo * 60_000),
    ...overrides,
  });

  it("when sessions are created, then each is read back by id as stored, and an unknown id is undefined", async () => {
    const store = await open();
    const owner = session(`s_${unique()}`, `own_${unique()}`, 3);
    const operator = session(`s_${unique()}`, "", 2);
    await store.create(owner);
    await store.create(operator);
    assert.deepEqual(await store.get(owner.sessionId), owner);
    assert.deepEqual(await store.get(operator.sessionId), operator);
    assert.equal(await store.get(`s_${unique()}`), undefined);
  });

  it("when a session is revoked, then it keeps its first end, an unknown one is false, and a credential's revocation ends only its own open sessions", async () => {
    const store = await open();
    const [mine, other] = [`own_${unique()}`, `own_${unique()}`];
    const [a, b, c, d] = [session(`s_${unique()}`, mine, 4), session(`s_${unique()}`, mine, 3), session(`s_${unique()}`, mine, 2), session(`s_${unique()}`, other, 1)];
    for (const record of [a, b, c, d]) await store.create(record);
    const first = new Date(base);
    assert.equal(await store.revoke(a.sessionId, first), true);
    assert.equal(await store.revoke(a.sessionId, new Date(base + 1_000)), true, "ending an ended session is no error");
    assert.deepEqual((await store.get(a.sessionId))?.revokedAt, first, "it keeps its first end");
    assert.equal(await store.revoke(`s_${unique()}`, first), false);
    assert.equal(await store.revokeByCredential(mine, new Date(base + 2_000)), 2, "the two still open");
    for (const record of [b, c]) assert.ok((await store.get(record.sessionId))?.revokedAt, record.sessionId);
    assert.equal((await store.get(d.sessionId))?.revokedAt, undefined, "another credential's session stays open");
  });

  it("when open sessions are listed, then revoked and expired ones are left out, newest first, at most the limit", async () => {
    const store = await open();
    const credential = `own_${unique()}`;
    const older = session(`s_${unique()}`, credential, 30);
    const newer = session(`s_${unique()}`, credential, 10);
    const ended = session(`s_${unique()}`, credential, 5);
    const expired = session(`s_${unique()}`, credential, 90, { expiresAt: new Date(base - 60_000) });
    for (const record of [older, newer, ended, expired]) await store.create(record);
    await store.revoke(ended.sessionId, new Date(base));
    assert.equal(await store.revoke(expired.sessionId, new Date(base)), false, "an expired session has nothing left to end");
    const ours = (await store.listOpen(new Date(base), 1_000)).filter((record) => record.credentialId === credential);
    assert.deepEqual(ours.map((record) => record.sessionId), [newer.sessionId, older.sessionId]);
    assert.equal((await store.listOpen(new Date(base), 1)).length, 1);
  });
}

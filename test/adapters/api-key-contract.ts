import { it } from "node:test";
import assert from "node:assert/strict";
import type { ApiKeyRecord, ApiKeyStore } from "../../src/ports/api-key-store.js";

/** What every ApiKeyStore does with roles and per-account listing (the panel's key list and owner tokens). */
export function apiKeyListingContract(open: () => Promise<ApiKeyStore>, unique: () => string): void {
  it("when keys and an owner token of two accounts are stored, then each account lists its own, oldest first, with role, limits and revocation", async () => {
    const store = await open();
    const [a, b] = [`acct_a_${unique()}`, `acct_b_${unique()}`];
    const at = (minute: number) => new Date(Date.UTC(2026, 10, 24, 10, minute));
    const records: ApiKeyRecord[] = [
      { keyId: `k2_${unique()}`, accountId: a, secretHash: `h2_${unique()}`, models: ["*"], revoked: false, createdAt: at(2), limits: { ratePerMinute: 5 } },
      { keyId: `k1_${unique()}`, accountId: a, secretHash: `h1_${unique()}`, models: ["aimodel-2.5-flash-image"], revoked: false, createdAt: at(1) },
      { keyId: `o1_${unique()}`, accountId: a, secretHash: `ho_${unique()}`, models: [], revoked: false, createdAt: at(3), role: "owner" },
      { keyId: `k3_${unique()}`, accountId: b, secretHash: `h3_${unique()}`, models: ["*"], revoked: false, createdAt: at(0) },
    ];
    for (const record of records) await store.create(record);
    assert.equal(await store.revoke(records[1]!.keyId), true);
    const listed = await store.listByAccount(a);
    assert.deepEqual(listed.map((r) => r.keyId), [records[1]!.keyId, records[0]!.keyId, records[2]!.keyId]);
    assert.equal(listed[0]!.revoked, true);
    assert.deepEqual(listed[1]!.limits, { ratePerMinute: 5 });
    assert.deepEqual(listed.map((r) => r.role ?? "key"), ["key", "key", "owner"]);
    assert.equal((await store.findBySecretHash(records[2]!.secretHash))?.role, "owner", "the role is read with the lookup of every request");
    assert.equal((await store.findBySecretHash(records[0]!.secretHash))?.role ?? "key", "key");
    assert.deepEqual((await store.listByAccount(b)).map((r) => r.keyId), [records[3]!.keyId]);
    assert.deepEqual(await store.listByAccount(`nobody_${unique()}`), []);
  });
}

/** What every ApiKeyStore does with a key's name, its changes and a rotation of its secret (issue 39). */
export function apiKeyChangeContract(open: () => Promise<ApiKeyStore>, unique: () => string): void {
  const key = (overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord => ({
    keyId: `k_${unique()}`, accountId: `acct_${unique()}`, secretHash: `h_${unique()}`, models: ["*"], revoked: false,
    createdAt: new Date(Date.UTC(2026, 11, 3, 10)), limits: { ratePerMinute: 5 }, name: "build server", ...overrides,
  });

  it("when a key's name, grants and limits change together, then the next lookup by its secret, id and account reads them all", async () => {
    const store = await open();
    const record = key();
    await store.create(record);
    assert.equal((await store.findBySecretHash(record.secretHash))?.name, "build server", "the name is read with the lookup");
    const changed = await store.update(record.keyId, { name: "ci", models: ["aimodel-3.5-flash"], limits: { spendLimit: 5_000_000_000_000n } });
    assert.deepEqual([changed?.name, changed?.models, changed?.limits], ["ci", ["aimodel-3.5-flash"], { spendLimit: 5_000_000_000_000n }]);
    for (const read of [await store.findBySecretHash(record.secretHash), await store.get(record.keyId), (await store.listByAccount(record.accountId))[0]]) {
      assert.deepEqual([read?.name, read?.models, read?.limits], ["ci", ["aimodel-3.5-flash"], { spendLimit: 5_000_000_000_000n }]);
    }
    const onlyName = await store.update(record.keyId, { name: "renamed" });
    assert.deepEqual([onlyName?.name, onlyName?.models, onlyName?.limits], ["renamed", ["aimodel-3.5-flash"], { spendLimit: 5_000_000_000_000n }], "fields not given stay");
    assert.equal(await store.update(`nobody_${unique()}`, { name: "x" }), undefined);
  });

  it("when a key is rotated, then the new secret finds the key, the old one finds it marked with its end, and a second rotation ends the older secret", async () => {
    const store = await open();
    const record = key();
    await store.create(record);
    const [second, third] = [`h2_${unique()}`, `h3_${unique()}`];
    const graceEnd = new Date(Date.UTC(2026, 11, 3, 11));
    const rotated = await store.rotate(record.keyId, second, graceEnd);
    assert.deepEqual([rotated?.keyId, rotated?.secretHash, rotated?.previousSecretExpiresAt?.getTime()], [record.keyId, second, graceEnd.getTime()]);
    const byNew = await store.findBySecretHash(second);
    assert.deepEqual([byNew?.keyId, byNew?.secretExpiresAt, byNew?.models, byNew?.limits], [record.keyId, undefined, ["*"], { ratePerMinute: 5 }]);
    const byOld = await store.findBySecretHash(record.secretHash);
    assert.deepEqual([byOld?.keyId, byOld?.secretHash, byOld?.secretExpiresAt?.getTime()], [record.keyId, second, graceEnd.getTime()]);
    await store.update(record.keyId, { models: ["aimodel-3.5-flash"] });
    assert.deepEqual((await store.findBySecretHash(record.secretHash))?.models, ["aimodel-3.5-flash"], "the old secret reads the key's grants as they are now");
    await store.rotate(record.keyId, third, new Date(Date.UTC(2026, 11, 3, 12)));
    const oldest = await store.findBySecretHash(record.secretHash);
    // Gone (one previous secret is kept) or ended long before any clock of this test (Cassandra marks it with the epoch).
    assert.equal(oldest === undefined || oldest.secretExpiresAt!.getTime() < Date.UTC(2026, 0, 1), true, `the secret two rotations back is ended: ${JSON.stringify(oldest)}`);
    assert.equal((await store.findBySecretHash(second))?.secretExpiresAt?.getTime(), Date.UTC(2026, 11, 3, 12));
    assert.deepEqual((await store.listByAccount(record.accountId)).map((r) => r.secretHash), [third], "the listing shows the key once, with its current secret");
    assert.equal(await store.revoke(record.keyId), true);
    assert.equal((await store.findBySecretHash(second))?.revoked, true, "revoking the key ends a secret in its grace too");
    assert.equal(await store.rotate(`nobody_${unique()}`, `h4_${unique()}`, graceEnd), undefined);
  });
}

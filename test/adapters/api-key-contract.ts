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

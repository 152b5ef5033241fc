// The chaos run's history checker, in the spirit of Jepsen's: given what the clients saw (every request and its answer,
// the webhooks received) and what the stores hold at the end (each account's jobs, statement and balance), it names
// every broken rule. Pure: no I/O, so its rules have unit tests of their own (test/repo/chaos-checker.test.ts).
import { createHmac, timingSafeEqual } from "node:crypto";

const SCALE = 12;
/** A decimal amount ("-0.039") as a bigint of 10^-12 units; money is never a float here either. */
export function amountOf(text) {
  const match = /^(-)?(\d+)(?:\.(\d{1,12}))?$/.exec(String(text));
  if (!match) throw new Error(`not an amount: ${text}`);
  const value = BigInt(match[2]) * 10n ** BigInt(SCALE) + BigInt((match[3] ?? "").padEnd(SCALE, "0"));
  return match[1] ? -value : value;
}
const formatAmount = (value) => {
  const negative = value < 0n;
  const abs = negative ? -value : value;
  const whole = abs / 10n ** BigInt(SCALE);
  const fraction = (abs % 10n ** BigInt(SCALE)).toString().padStart(SCALE, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
};

/**
 * Whether a delivery carries a Standard Webhooks signature made with `secret` (HMAC-SHA256 over "id.timestamp.body").
 * The signature alone: a library's verify() also refuses timestamps 5 minutes from now, and the run checks at its end.
 */
export function signatureValid(secret, delivery) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signed = `${delivery.headers["webhook-id"]}.${delivery.headers["webhook-timestamp"]}.${delivery.body}`;
  const expected = createHmac("sha256", key).update(signed).digest();
  return String(delivery.headers["webhook-signature"] ?? "").split(" ").some((part) => {
    const [version, signature] = part.split(",");
    const given = Buffer.from(signature ?? "", "base64");
    return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const TERMINAL_OK = new Set(["done", "failed"]);

function checkJobs(history, violations) {
  let lost = 0;
  const stored = new Map();
  for (const account of history.accounts) for (const job of account.jobs) stored.set(job.job_id, { job, account });
  const opsOfJob = new Map();
  for (const op of history.ops) {
    const ids = new Set(op.jobIds);
    if (ids.size > 1) violations.push({ rule: "idempotency", detail: `Idempotency-Key ${op.key} answered with ${ids.size} jobs: ${[...ids].join(", ")}` });
    for (const id of ids) {
      opsOfJob.set(id, [...(opsOfJob.get(id) ?? []), op.key]);
      const found = stored.get(id);
      if (!found) {
        lost++;
        violations.push({ rule: "lost", detail: `job ${id} (key ${op.key}) was accepted but is not in the store` });
      } else if (!TERMINAL_OK.has(found.job.status)) {
        violations.push({ rule: "job-end", detail: `job ${id} ended ${found.job.status}, not done or failed` });
      }
    }
  }
  for (const [id, keys] of opsOfJob) {
    if (new Set(keys).size > 1) violations.push({ rule: "idempotency", detail: `job ${id} answered to several keys: ${keys.join(", ")}` });
  }
  // The clients tag each job with its key in metadata: two stored jobs with one key are a duplicate a client never saw.
  const jobsOfKey = new Map();
  for (const { job } of stored.values()) {
    const key = job.metadata?.chaos_key;
    if (typeof key === "string") jobsOfKey.set(key, [...(jobsOfKey.get(key) ?? []), job.job_id]);
  }
  for (const [key, ids] of jobsOfKey) {
    if (ids.length > 1) violations.push({ rule: "idempotency", detail: `Idempotency-Key ${key} has ${ids.length} jobs in the store: ${ids.join(", ")}` });
  }
  return { lost, stored };
}

function checkStatement(account, credited, violations) {
  const name = account.accountId;
  const chronological = [...account.entries].reverse(); // the statement lists the newest first
  let sum = 0n;
  let reserved = 0n;
  let credits = 0n;
  let charges = 0n;
  let reconciles = true;
  const holds = new Map();
  const ends = new Map();
  const charged = new Map();
  const chargedAmount = new Map();
  for (const entry of chronological) {
    const amount = amountOf(entry.amount);
    sum += amount;
    reserved += amountOf(entry.reserved_change);
    if (amountOf(entry.balance_after) !== sum || amountOf(entry.reserved_after) !== reserved) {
      reconciles = false;
      violations.push({ rule: "statement", detail: `${name}: entry ${entry.entry_id} says ${entry.balance_after}/${entry.reserved_after}, the entries before it give ${formatAmount(sum)}/${formatAmount(reserved)}` });
    }
    if (entry.type === "credit") credits += amount;
    if (entry.type === "charge") charges -= amount;
    if (entry.type === "hold") {
      if (amountOf(entry.balance_after) - amountOf(entry.reserved_after) < 0n) {
        violations.push({ rule: "admission", detail: `${name}: hold ${entry.entry_id} (job ${entry.job_id}) admitted beyond the available balance: balance ${entry.balance_after}, reserved ${entry.reserved_after}` });
      }
      if (entry.job_id) holds.set(entry.job_id, (holds.get(entry.job_id) ?? 0) + 1);
    }
    if ((entry.type === "charge" || entry.type === "release") && entry.job_id) ends.set(entry.job_id, (ends.get(entry.job_id) ?? 0) + 1);
    if (entry.type === "charge" && entry.job_id) {
      charged.set(entry.job_id, (charged.get(entry.job_id) ?? 0) + 1);
      chargedAmount.set(entry.job_id, (chargedAmount.get(entry.job_id) ?? 0n) - amount);
    }
  }
  let doubleCharged = 0;
  for (const [job, count] of holds) {
    if (count > 1) violations.push({ rule: "hold", detail: `${name}: job ${job} has ${count} holds` });
    const ended = ends.get(job) ?? 0;
    if (ended !== 1) violations.push({ rule: "hold", detail: `${name}: job ${job}'s hold ended ${ended} times` });
  }
  for (const [job, count] of ends) if (!holds.has(job)) violations.push({ rule: "hold", detail: `${name}: job ${job} ended ${count} times without a hold` });
  for (const [job, count] of charged) {
    if (count > 1) {
      doubleCharged++;
      violations.push({ rule: "double-charge", detail: `${name}: job ${job} charged ${count} times` });
    }
  }
  const balance = amountOf(account.balance);
  if (sum !== balance || reserved !== amountOf(account.reserved)) {
    reconciles = false;
    violations.push({ rule: "statement", detail: `${name}: entries add up to ${formatAmount(sum)}/${formatAmount(reserved)}, the balance says ${account.balance}/${account.reserved}` });
  }
  const exact = balance === credited - charges && credits === credited && amountOf(account.reserved) === 0n;
  if (credits !== credited) violations.push({ rule: "money", detail: `${name}: statement credits ${formatAmount(credits)}, the clients credited ${formatAmount(credited)}` });
  if (balance !== credited - charges) {
    violations.push({ rule: "money", detail: `${name}: balance ${account.balance} is not credits ${formatAmount(credited)} minus charges ${formatAmount(charges)}` });
  }
  if (amountOf(account.reserved) !== 0n) violations.push({ rule: "money", detail: `${name}: ${account.reserved} still reserved at the end` });
  // What the statement charged a job is what the job itself says it was charged (its usage.charged).
  let agrees = true;
  for (const job of account.jobs) {
    const said = job.usage?.charged;
    if (said === undefined || said === null) continue;
    const got = chargedAmount.get(job.job_id) ?? 0n;
    if (got !== amountOf(said)) {
      agrees = false;
      violations.push({ rule: "money", detail: `${name}: job ${job.job_id} says it was charged ${said}, the statement charged it ${formatAmount(got)}` });
    }
  }
  return { doubleCharged, exact: exact && agrees && doubleCharged === 0, reconciles, charged };
}

function checkWebhooks(history, stored, violations) {
  const idsOfJob = new Map();
  for (const delivery of history.webhooks) {
    if (!delivery.validSignature) violations.push({ rule: "webhook", detail: `delivery ${delivery.id} (job ${delivery.jobId}) has no valid signature` });
    const ids = idsOfJob.get(delivery.jobId) ?? new Set();
    ids.add(delivery.id);
    idsOfJob.set(delivery.jobId, ids);
    const found = stored.get(delivery.jobId);
    if (!found) violations.push({ rule: "webhook", detail: `webhook ${delivery.id} names job ${delivery.jobId}, which is not in the store` });
    else if ((delivery.status === "success") !== (found.job.status === "done")) {
      violations.push({ rule: "webhook", detail: `webhook ${delivery.id} says ${delivery.status}, job ${delivery.jobId} is ${found.job.status}` });
    }
  }
  for (const [id, { job, account }] of stored) {
    if (!account.webhooks || !TERMINAL_OK.has(job.status)) continue;
    const count = idsOfJob.get(id)?.size ?? 0;
    if (count !== 1) violations.push({ rule: "webhook", detail: `job ${id} has ${count} webhook ids` });
  }
}

/** Availability per window (each fault, and the time between faults): answers by class, and the refusals that break the rule. */
export function availability(history, violations = []) {
  const windows = [...history.faults.map((f) => ({ name: f.name, start: f.start, end: f.end })), { name: "no fault", start: -Infinity, end: Infinity }];
  const rows = windows.map((w) => ({ window: w.name, total: 0, ok: 0, refused503: 0, other4xx: 0, network: 0, bad: 0, slowestMs: 0 }));
  for (const request of history.requests) {
    const at = history.faults.findIndex((f) => request.t >= f.start && request.t < f.end);
    const row = rows[at === -1 ? rows.length - 1 : at];
    row.total++;
    row.slowestMs = Math.max(row.slowestMs, request.ms ?? 0);
    const status = request.status;
    if (status === null || status === undefined) row.network++;
    else if (status >= 200 && status < 300) row.ok++;
    else if (status === 503 && request.retryAfter) row.refused503++;
    else if (status >= 400 && status < 500) row.other4xx++;
    else {
      row.bad++;
      violations.push({ rule: "refusal", detail: `${request.method ?? "POST"} ${request.kind} at ${new Date(request.t).toISOString()} answered ${status}${status === 503 ? " without Retry-After" : ""}${request.code ? ` (${request.code})` : ""}` });
    }
  }
  return rows.map((r) => ({ ...r, share2xx: r.total === 0 ? null : r.ok / r.total }));
}

/** Every rule over one run's history; `verdict` is the run's one line. */
export function checkHistory(history) {
  const violations = [];
  const { lost, stored } = checkJobs(history, violations);
  let doubleCharged = 0;
  let moneyExact = true;
  for (const account of history.accounts) {
    const credited = history.credits.filter((c) => c.accountId === account.accountId).reduce((s, c) => s + amountOf(c.amount), 0n);
    const result = checkStatement(account, credited, violations);
    doubleCharged += result.doubleCharged;
    moneyExact &&= result.exact && result.reconciles;
    for (const [jobId] of result.charged) {
      const found = stored.get(jobId);
      if (found && found.job.status !== "done") violations.push({ rule: "double-charge", detail: `job ${jobId} is ${found.job.status} but was charged` });
    }
  }
  checkWebhooks(history, stored, violations);
  const windows = availability(history, violations);
  const badRefusals = windows.reduce((s, w) => s + w.bad, 0);
  const accepted = new Set(history.ops.flatMap((op) => op.jobIds)).size;
  const pass = violations.length === 0;
  const verdict = `${pass ? "PASS" : "FAIL"}: ${lost} lost, ${doubleCharged} double-charged, money ${moneyExact ? "exact" : "NOT exact"}, `
    + `${badRefusals === 0 ? "every refusal 503 with Retry-After" : `${badRefusals} refusals not 503 with Retry-After`}; `
    + `${accepted} jobs accepted, ${history.requests.length} requests, ${violations.length} violations`;
  return { pass, violations, availability: windows, lost, doubleCharged, moneyExact, verdict };
}

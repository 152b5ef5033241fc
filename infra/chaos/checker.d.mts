/** See checker.mjs. */
export interface ChaosRequest {
  /** When it was sent (ms since the epoch). */
  t: number;
  kind: string;
  method?: string;
  /** The answer's status; null when no answer came (connection refused or reset, timeout). */
  status: number | null;
  retryAfter: string | null;
  code?: string | null;
  /** How long it took to answer (or to fail). */
  ms?: number;
}
export interface ChaosOp {
  /** Its Idempotency-Key (also sent as metadata.chaos_key). */
  key: string;
  kind: string;
  /** The job ids of every 2xx answer to it. */
  jobIds: string[];
}
export interface ChaosEntry {
  entry_id: string;
  type: "credit" | "hold" | "charge" | "release";
  amount: string;
  balance_after: string;
  reserved_change: string;
  reserved_after: string;
  job_id: string | null;
  created_at: string;
}
export interface ChaosJob {
  job_id: string;
  status: string;
  metadata?: Record<string, unknown> | null;
  /** What the job says it was charged (usage.charged), when it says. */
  usage?: { charged?: string | null } | null;
}
export interface ChaosAccount {
  accountId: string;
  balance: string;
  reserved: string;
  /** The statement, newest first (as GET …/ledger lists it). */
  entries: ChaosEntry[];
  jobs: ChaosJob[];
  /** Whether the account has a webhook (each of its finished jobs then needs one). */
  webhooks: boolean;
}
export interface ChaosWebhook {
  id: string;
  jobId: string;
  status: string;
  validSignature: boolean;
}
export interface ChaosFault {
  name: string;
  start: number;
  end: number;
}
export interface ChaosHistory {
  faults: ChaosFault[];
  requests: ChaosRequest[];
  ops: ChaosOp[];
  credits: { accountId: string; amount: string }[];
  accounts: ChaosAccount[];
  webhooks: ChaosWebhook[];
}
export interface Violation {
  rule: "lost" | "job-end" | "idempotency" | "hold" | "double-charge" | "admission" | "money" | "statement" | "webhook" | "refusal";
  detail: string;
}
export interface AvailabilityRow {
  window: string;
  total: number;
  ok: number;
  refused503: number;
  other4xx: number;
  network: number;
  bad: number;
  /** The longest a request sent in the window took: a paused node shows here more than in the share. */
  slowestMs: number;
  share2xx: number | null;
}
export interface ChaosVerdict {
  pass: boolean;
  violations: Violation[];
  availability: AvailabilityRow[];
  lost: number;
  doubleCharged: number;
  moneyExact: boolean;
  verdict: string;
}
export function amountOf(text: string): bigint;
export function signatureValid(secret: string, delivery: { body: string; headers: Record<string, string> }): boolean;
export function availability(history: ChaosHistory, violations?: Violation[]): AvailabilityRow[];
export function checkHistory(history: ChaosHistory): ChaosVerdict;

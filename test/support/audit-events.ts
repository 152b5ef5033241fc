/** One audit event as GET /admin/v1/audit answers it (issue 39). */
export interface AuditEventJson {
  event_id: string;
  created_at: string;
  kind: string;
  actor: string;
  client_address: string;
  account_id: string | null;
  subject: string | null;
  before: string | null;
  after: string | null;
}

// backends: embedded, real
/**
 * Exports (issue 39): GET /api/v1/ledger and /api/v1/usage, and their admin counterparts, answer CSV with
 * Accept: text/csv: a header line, one record per entry, amounts as exact decimal strings, RFC 4180 quoting,
 * streamed page by page (the first rows leave before the store's last page is read), as an attachment. JSON stays
 * the default. Both backends (TEST_BACKEND).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { parseMoney } from "../../src/domain/money.js";
import { csvField, csvLine, LEDGER_COLUMNS } from "../../src/transport/http/csv-export.js";
import { ADMIN_TOKEN, call, createCustomer, finishedJob, pico, startTestService, type TestService } from "../support/harness.js";
import { parseExposition, valueOf } from "../support/exposition.js";
import { postGeneration } from "../support/jobs-api-helpers.js";
import { allEntries, type LedgerEntryJson } from "../support/ledger-helpers.js";

let service: TestService;

before(async () => {
  service = await startTestService({ SIMULATED_LATENCY_MS: "20" });
});

after(async () => {
  await service?.close();
});

/** RFC 4180 records: quoted fields may hold commas, doubled quotes and line breaks. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") record.push(field), (field = "");
    else if (c === "\r" && text[i + 1] === "\n") record.push(field), records.push(record), (record = []), (field = ""), i++;
    else field += c;
  }
  assert.equal(field + record.join(""), "", "the last record ends with CRLF");
  return records;
}

/** CSV records as objects of the header's columns. */
function csvObjects(text: string): Record<string, string>[] {
  const [header, ...rows] = parseCsv(text);
  return rows.map((row) => Object.fromEntries(header!.map((column, i) => [column, row[i]!])));
}

/** A JSON entry as its CSV record reads: every value as text, null as an empty field. */
const asCsvRecord = (entry: LedgerEntryJson) =>
  Object.fromEntries(LEDGER_COLUMNS.map((column) => [column, entry[column] === null ? "" : String(entry[column])]));

const csvHeaders = { accept: "text/csv" };

async function accountWithHistory() {
  const customer = await createCustomer(service, "10.00");
  const credit = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: "2.5" } });
  assert.equal(credit.status, 200, credit.text);
  const created = await postGeneration(service, customer.apiKey, { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" });
  assert.equal(created.status, 202, created.text);
  await finishedJob(service, customer.apiKey, created.json.job_id);
  const text = await call(service, "POST", "/api/aimodel/v1beta/models/aimodel-3.5-flash:generateContent", {
    vendorKey: customer.apiKey, body: { contents: [{ parts: [{ text: "Say hello" }] }] },
  });
  assert.equal(text.status, 200, text.text);
  return customer;
}

describe("statement and usage exports", () => {
  it("when the statement is asked as CSV, then its records equal the JSON statement exactly, for the key and the operator", async () => {
    const customer = await accountWithHistory();
    const json = await allEntries(service, { key: customer.apiKey });
    assert.ok(json.some((entry) => entry.type === "charge") && json.some((entry) => entry.type === "credit"));
    const own = await call(service, "GET", "/api/v1/ledger", { key: customer.apiKey, headers: csvHeaders });
    assert.equal(own.status, 200, own.text);
    assert.match(own.headers.get("content-type") ?? "", /^text\/csv/);
    assert.equal(own.headers.get("content-disposition"), 'attachment; filename="ledger.csv"');
    assert.equal(own.text.split("\r\n")[0], LEDGER_COLUMNS.join(","));
    assert.deepEqual(csvObjects(own.text), json.map(asCsvRecord));
    const balance = csvObjects(own.text).map((row) => pico(row.amount!)).reduce((sum, amount) => sum + amount, 0n);
    assert.equal(balance, pico((await call(service, "GET", "/api/v1/balance", { key: customer.apiKey })).json.balance), "amounts are exact");

    const admin = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/ledger?limit=2`, { admin: true, headers: csvHeaders });
    assert.equal(admin.status, 200, admin.text);
    assert.equal(admin.headers.get("content-disposition"), `attachment; filename="ledger-${customer.accountId}.csv"`);
    assert.deepEqual(csvObjects(admin.text), json.map(asCsvRecord), "pages of 2 make the same records");
  });

  it("when the usage report is asked as CSV, then its records equal the JSON report, grouped as asked", async () => {
    const customer = await accountWithHistory();
    for (const [groupBy, column] of [["model", "model"], ["key", "key_id"], ["day", "day"]] as const) {
      const json = await call(service, "GET", `/api/v1/usage?group_by=${groupBy}`, { key: customer.apiKey });
      assert.equal(json.status, 200, json.text);
      assert.ok(json.json.rows.length > 0);
      const csv = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/usage?group_by=${groupBy}`, { admin: true, headers: csvHeaders });
      assert.equal(csv.status, 200, csv.text);
      assert.equal(csv.headers.get("content-disposition"), `attachment; filename="usage-${customer.accountId}.csv"`);
      assert.equal(csv.text.split("\r\n")[0], `${column},requests,prompt_token_count,candidates_token_count,spend`);
      const expected = json.json.rows.map((row: Record<string, unknown>) => ({
        [column]: String(row[column]), requests: String(row.requests), prompt_token_count: String(row.prompt_token_count),
        candidates_token_count: String(row.candidates_token_count), spend: String(row.spend),
      }));
      assert.deepEqual(csvObjects(csv.text), expected);
      const own = await call(service, "GET", `/api/v1/usage?group_by=${groupBy}`, { key: customer.apiKey, headers: csvHeaders });
      assert.equal(own.text, csv.text);
    }
  });

  it("when no Accept or a JSON one is sent, then the answer stays JSON; a bad query asked as CSV is the usual 400 and no CSV", async () => {
    const customer = await createCustomer(service, "1.00");
    for (const accept of [undefined, "*/*", "application/json", "application/json, text/csv;q=0.5"]) {
      const response = await call(service, "GET", "/api/v1/ledger", { key: customer.apiKey, headers: accept ? { accept } : {} });
      assert.equal(response.status, 200, response.text);
      assert.equal(response.json.entries.length, 1, `accept ${accept}`);
    }
    const bad = await call(service, "GET", "/api/v1/ledger?limit=1000", { key: customer.apiKey, headers: csvHeaders });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.code, "invalid_limit");
    const badUsage = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/usage?group_by=week`, { admin: true, headers: csvHeaders });
    assert.equal(badUsage.status, 400, badUsage.text);
    assert.equal(badUsage.json.error.code, "invalid_group_by");
    const unauthenticated = await call(service, "GET", "/api/v1/ledger", { headers: csvHeaders });
    assert.equal(unauthenticated.status, 401);
  });

  it("when a field holds a comma, a quote or a line break, then it is quoted as RFC 4180 says", () => {
    assert.equal(csvField("plain-0.134"), "plain-0.134");
    assert.equal(csvField('say "hi", then\r\nleave'), '"say ""hi"", then\r\nleave"');
    assert.equal(csvLine(["a,b", null, 3]), '"a,b",,3\r\n');
    assert.deepEqual(parseCsv(csvLine(['x"y', "1,2", "line\nbreak"])), [['x"y', "1,2", "line\nbreak"]]);
  });

  it("when a statement of many pages is exported, then its first records arrive before the store's last page is read", async () => {
    const customer = await createCustomer(service, "1.00");
    const ledger = service.running.core!.deps.ledger;
    const credits = 20_000;
    for (let done = 0; done < credits; done += 250) {
      await Promise.all(Array.from({ length: 250 }, () => ledger.credit(customer.accountId, parseMoney("0.01"))));
    }
    const pages = Math.ceil((credits + 1) / 100);
    const pagesRead = async () =>
      valueOf(parseExposition(await service.running.metrics.exposition()), "rpc_server_requests_total", {
        method: "ListAccountLedgerEntries",
      });
    const before = await pagesRead();
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const url = new URL(`/admin/v1/accounts/${customer.accountId}/ledger`, service.url);
      httpRequest(url, { headers: { ...csvHeaders, authorization: `Bearer ${ADMIN_TOKEN}` } }, resolve).on("error", reject).end();
    });
    assert.equal(response.statusCode, 200);
    const chunks: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      response.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        if (chunks.length === 1) {
          response.pause();
          resolve();
        }
      });
      response.once("error", reject);
    });
    const atFirstRecords = (await pagesRead()) - before;
    assert.ok(atFirstRecords < pages / 2, `${atFirstRecords} of ${pages} pages were read when the first records arrived`);
    const ended = new Promise((resolve) => response.once("end", resolve));
    response.resume();
    await ended;
    const records = parseCsv(Buffer.concat(chunks).toString("utf8"));
    assert.equal(records.length, credits + 2, "the header, the opening credit and every credit");
    assert.equal(records.slice(1).filter((record) => record[1] === "credit" && record[2] === "0.01").length, credits);
    assert.ok((await pagesRead()) - before >= pages, "then every page was read");
  });
});

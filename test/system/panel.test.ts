// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { ADMIN_TOKEN, call, eventually, pico, startTestService, type TestService } from "../support/harness.js";
import { allEntries } from "../support/ledger-helpers.js";
import { rpc } from "../support/panel-helpers.js";
import { withReceiver } from "../support/webhook-receiver.js";

/**
 * Issue 11: the web panel in a real browser (Debian's Chromium, driven by
 * playwright-core) against a running service. Every step is what a new user
 * does: the operator signs in with the admin token, opens an account and
 * issues its owner token; the owner signs in and creates a key with grants
 * and limits, which then works on the REST API. Screenshots of the screens
 * go to PANEL_SCREENSHOTS (default test-results/panel).
 */
const CHROMIUM = "/usr/bin/chromium";
const SHOTS = process.env.PANEL_SCREENSHOTS ?? join("test-results", "panel");
const TEXT = "aimodel-3.5-flash";

describe("the web panel in Chromium", () => {
  let service: TestService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  before(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`the browser test needs Chromium at ${CHROMIUM}: apt-get install -y chromium`);
    await mkdir(SHOTS, { recursive: true });
    service = await startTestService();
    browser = await chromium.launch({ executablePath: CHROMIUM });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      // GET /panel/session answers 401 while no one is signed in: that is how the page learns it (Chromium logs it).
      const expected = message.location().url.endsWith("/panel/session") && message.text().includes("401");
      if (message.type() === "error" && !expected) problems.push(`console: ${message.text()} (${message.location().url})`);
    });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  /** Every form control has a label a screen reader announces. */
  function unlabelled(): Promise<string[]> {
    return unlabelledIn(page);
  }
  function unlabelledIn(target: Page): Promise<string[]> {
    // Evaluated in the page (a string: this file is checked without the DOM's types).
    return target.evaluate(`[...document.querySelectorAll("input, select, textarea")]
      .filter((control) => control.labels?.length === 0 && !control.getAttribute("aria-label"))
      .map((control) => control.outerHTML)`);
  }

  it("when a new operator and owner use the panel, then an account, its owner token and a working key with grants and limits come out of it", async () => {
    await page.goto(`${service.url}/panel`);
    await page.getByLabel("Owner token or admin token").waitFor();
    await shot("01-sign-in");
    assert.deepEqual(await unlabelled(), []);

    // The operator: the admin token, typed once, becomes a session cookie the page cannot read.
    await page.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Open an account" }).waitFor();
    assert.equal(await page.evaluate("document.cookie"), "", "the session cookie is HttpOnly");
    await page.getByLabel("Name").fill("Acme");
    await page.getByLabel("Opening balance (USD)").fill("25.00");
    await page.getByRole("button", { name: "Open account" }).click();
    await page.getByTestId("operator-available").waitFor();
    assert.equal(await page.getByTestId("operator-available").textContent(), "$25.00");
    await page.getByRole("button", { name: "Issue an owner token" }).click();
    const ownerToken = (await page.getByTestId("owner-token").textContent()) ?? "";
    assert.match(ownerToken, /^gso_/);
    await shot("02-operator-accounts");

    // The owner: signed in with the token the operator just issued.
    await page.getByRole("button", { name: "Sign in as this owner" }).click();
    await page.getByTestId("available").waitFor();
    assert.equal(await page.getByTestId("available").textContent(), "$25.00");
    assert.match((await page.locator("#who").textContent()) ?? "", /Owner of acct_/);

    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("heading", { name: "New key" }).waitFor();
    const rule = (await page.locator("#grant-rule").textContent()) ?? "";
    assert.match(rule, /"\*" grants every model except aimodel-3\.1-flash-lite-image, which needs a grant of its own/);
    await page.getByRole("checkbox", { name: "* every model" }).check();
    await page.getByRole("checkbox", { name: "aimodel-3.1-flash-lite-image own grant needed" }).check();
    await page.getByRole("form", { name: "Create an API key" }).getByLabel("Requests per minute").fill("60");
    await page.getByRole("form", { name: "Create an API key" }).getByLabel("Spend limit per UTC day (USD)").fill("5.00");
    await page.getByRole("button", { name: "Create key" }).click();
    const apiKey = (await page.getByTestId("api-key-secret").textContent()) ?? "";
    assert.match(apiKey, /^gsk_/);
    assert.deepEqual(await unlabelled(), []);
    await shot("05-owner-new-key");

    // The key works on the REST API at once, with both grants.
    for (const body of [
      { model: "aimodel-2.5-flash-image", prompt: "a red bicycle" },
      { model: "aimodel-3.1-flash-lite-image", prompt: "a lamp", aspect_ratio: "1:1", resolution: "1K" },
    ]) {
      const job = await call(service, "POST", "/api/v1/generations", { key: apiKey, body });
      assert.equal(job.status, 202, job.text);
    }
    // The new key is listed at once, while its secret is still shown.
    const row = page.getByRole("row").filter({ hasText: "60/min" });
    await row.waitFor();
    assert.equal(await page.getByTestId("api-key-secret").textContent(), apiKey);
    await page.getByRole("button", { name: "Done" }).click();
    assert.match((await row.textContent()) ?? "", /\$5\.00\/day/);
    await shot("06-owner-keys");

    // Revoked from the panel: refused at once.
    page.once("dialog", (dialog) => void dialog.accept());
    await row.getByRole("button", { name: /^Revoke / }).click();
    await page.getByRole("row").filter({ hasText: "revoked" }).waitFor();
    const refused = await call(service, "GET", "/api/v1/balance", { key: apiKey });
    assert.equal(refused.status, 401);

    await page.getByRole("link", { name: "Prices" }).click();
    await page.getByRole("table", { name: "Price table" }).waitFor();
    const prices = (await page.getByRole("table", { name: "Price table" }).textContent()) ?? "";
    for (const text of ["aimodel-3-pro-image", "per image at 4K", "per second at 1080p", "per 1M input tokens", "per 1M video-output tokens"]) {
      assert.ok(prices.includes(text), `the price table shows ${text}`);
    }
    await shot("07-prices");
    assert.deepEqual(problems, []);
  });

  it("when the panel is used on a phone's screen, then nothing overflows sideways and the controls stay reachable", async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    try {
      const mobile = await phone.newPage();
      await mobile.goto(`${service.url}/panel/`);
      await mobile.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
      await mobile.getByRole("button", { name: "Sign in" }).click();
      await mobile.getByRole("heading", { name: "Open an account" }).waitFor();
      const overflow = (await mobile.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
      assert.ok(overflow <= 0, `the page is ${overflow} px wider than the screen`);
      await mobile.screenshot({ path: join(SHOTS, "11-phone-operator.png"), fullPage: true });
      // Keyboard only: Tab reaches the first field of the screen, Enter submits its form.
      await mobile.getByLabel("Name").focus();
      await mobile.keyboard.type("Keyboard Co");
      await mobile.keyboard.press("Tab");
      await mobile.keyboard.type("1.00");
      await mobile.keyboard.press("Enter");
      await mobile.getByTestId("operator-available").waitFor();
      assert.equal(await mobile.getByTestId("operator-available").textContent(), "$1.00");
    } finally {
      await phone.close();
    }
  });

  /** A fresh browser context signed in as the owner of a new account (the operator's steps done over the API). */
  async function ownerPage(
    target: TestService, balance: string, options: { timezoneId?: string; viewport?: { width: number; height: number }; acceptDownloads?: boolean } = {},
  ): Promise<{ page: Page; context: BrowserContext; accountId: string }> {
    const opened = await call(target, "POST", "/admin/v1/accounts", { admin: true, body: { name: "owner", balance } });
    const issued = await fetch(`${target.url}/generation.v1.AdminService/CreateOwnerToken`, {
      method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ accountId: opened.json.account_id }),
    });
    const { ownerToken } = (await issued.json()) as { ownerToken: string };
    const ownerContext = await browser.newContext({
      viewport: options.viewport ?? { width: 1280, height: 900 }, timezoneId: options.timezoneId, acceptDownloads: options.acceptDownloads,
    });
    const owner = await ownerContext.newPage();
    owner.on("pageerror", (error) => problems.push(`page error: ${error.message}`));

    await owner.goto(`${target.url}/panel/`);
    await owner.getByLabel("Owner token or admin token").fill(ownerToken);
    await owner.getByRole("button", { name: "Sign in" }).click();
    await owner.getByTestId("available").waitFor();
    return { page: owner, context: ownerContext, accountId: opened.json.account_id };
  }

  it("when the owner creates an image job in the panel, then its picture appears when it is done, and the statement shows the hold and the charge", async () => {
    const { page: owner, context: ownerContext } = await ownerPage(service, "10.00");
    try {
      await owner.getByRole("link", { name: "Jobs" }).click();
      const jobForm = owner.getByRole("form", { name: "Create a job" });
      await jobForm.getByLabel("Model").selectOption("aimodel-2.5-flash-image");
      await jobForm.getByLabel("Prompt").fill("a lighthouse at dusk");
      await jobForm.getByRole("button", { name: "Create job" }).click();
      await owner.getByTestId("job-status").filter({ hasText: "done" }).waitFor({ timeout: 20_000 });
      const image = owner.getByTestId("job-image");
      await image.waitFor();
      await eventually(async () => (await image.evaluate((img: any) => (img.complete ? img.naturalWidth : 0))) as number, (width) => width > 0, {
        what: "the picture loaded in the page",
      });
      assert.match((await owner.getByRole("list", { name: "Timeline" }).textContent()) ?? "", /Accepted \d{4}-.*Started \d{4}-.*Finished \d{4}-/);
      await owner.screenshot({ path: join(SHOTS, "03-owner-job.png"), fullPage: true });

      await owner.getByRole("link", { name: "Money" }).click();
      const statement = owner.getByTestId("statement");
      await statement.waitFor();
      await eventually(async () => (await statement.textContent()) ?? "", (text) => /charge/.test(text) && /hold/.test(text) && /credit/.test(text), {
        what: "credit, hold and charge in the statement",
      });
      const figure = owner.getByRole("img", { name: /^Spend per model: aimodel-2\.5-flash-image \$0\.\d+/ });
      await figure.waitFor();
      await owner.screenshot({ path: join(SHOTS, "04-owner-money.png"), fullPage: true });
    } finally {
      await ownerContext.close();
    }
  });

  it("when the owner cancels a running job in the panel, then it ends canceled and its hold is released", async () => {
    // Its own service: a render that takes long enough for a person to press Cancel.
    const slow = await startTestService({ SIMULATED_LATENCY_MS: "60000" });
    const { page: owner, context: ownerContext } = await ownerPage(slow, "10.00");
    try {
      await owner.getByRole("link", { name: "Jobs" }).click();
      const jobForm = owner.getByRole("form", { name: "Create a job" });
      await jobForm.getByLabel("Model").selectOption("aimodel-2.5-flash-image");
      await jobForm.getByLabel("Prompt").fill("something slow");
      await jobForm.getByRole("button", { name: "Create job" }).click();
      await owner.getByRole("button", { name: "Cancel job" }).click();
      await owner.getByTestId("job-status").filter({ hasText: "canceled" }).waitFor();
      await owner.getByRole("link", { name: "Money" }).click();
      await owner.getByTestId("reserved").waitFor();
      assert.equal(await owner.getByTestId("reserved").textContent(), "$0.00");
      assert.equal(await owner.getByTestId("available").textContent(), "$10.00");
    } finally {
      await ownerContext.close();
      await slow.close();
    }
  });

  it("when the operator pauses a model, then the owner's job form shows the 503 and nothing is charged", async () => {
    const { page: owner, context: ownerContext } = await ownerPage(service, "3.00");
    const operatorContext = await browser.newContext();
    try {
      const operator = await operatorContext.newPage();
      await operator.goto(`${service.url}/panel/`);
      await operator.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
      await operator.getByRole("button", { name: "Sign in" }).click();
      await operator.getByRole("link", { name: "Pauses, prices, routes" }).click();
      await operator.getByRole("button", { name: "Pause aimodel-3-pro-image" }).click();
      await operator.getByRole("button", { name: "Resume aimodel-3-pro-image" }).waitFor();
      await operator.screenshot({ path: join(SHOTS, "08-operator-controls.png"), fullPage: true });

      await owner.getByRole("link", { name: "Jobs" }).click();
      const jobForm = owner.getByRole("form", { name: "Create a job" });
      await jobForm.getByLabel("Model").selectOption("aimodel-3-pro-image");
      await jobForm.getByLabel("Prompt").fill("a paused model");
      await jobForm.getByRole("button", { name: "Create job" }).click();
      const alert = owner.locator("#notice[role=alert]");
      await alert.waitFor();
      assert.match((await alert.textContent()) ?? "", /^503 model_paused: aimodel-3-pro-image is paused/);
      await owner.screenshot({ path: join(SHOTS, "09-owner-paused-model.png"), fullPage: true });
      await owner.getByRole("link", { name: "Money" }).click();
      await owner.getByTestId("available").waitFor();
      assert.equal(await owner.getByTestId("available").textContent(), "$3.00");

      await operator.getByRole("button", { name: "Resume aimodel-3-pro-image" }).click();
      await operator.getByRole("button", { name: "Pause aimodel-3-pro-image" }).waitFor();
    } finally {
      await operatorContext.close();
      await ownerContext.close();
    }
  });

  it("when the owner sends a prompt in the text playground, then the answer streams into the page", async () => {
    const { page: owner, context: ownerContext } = await ownerPage(service, "2.00");
    try {
      await owner.getByRole("link", { name: "Text playground" }).click();
      const streamForm = owner.getByRole("form", { name: "Stream text" });
      await streamForm.getByLabel("Prompt").fill("Say hello");
      await streamForm.getByRole("button", { name: "Send" }).click();
      await eventually(async () => (await owner.getByTestId("stream-output").textContent()) ?? "", (text) => text.length > 0, { what: "streamed text" });
      await owner.getByText(/prompt \+ \d+ output tokens/).waitFor();
      await owner.screenshot({ path: join(SHOTS, "10-owner-playground.png"), fullPage: true });
    } finally {
      await ownerContext.close();
    }
  });
  it("when the owner sets a webhook and sends a test event, then it arrives at the receiver signed with the secret the panel shows, and is listed with its status code", async () => {
    const { page: owner, context: ownerContext } = await ownerPage(service, "1.00");
    try {
      await withReceiver(() => 202, async (receiver) => {
        await owner.getByRole("link", { name: "Webhook" }).click();
        await owner.getByRole("textbox", { name: "URL", exact: true }).fill(receiver.url);
        await owner.getByRole("button", { name: "Save URL" }).click();
        await owner.locator("#notice").filter({ hasText: "Webhook URL saved." }).waitFor();
        await owner.getByRole("button", { name: "Send a test event" }).click();
        await owner.locator("#notice").filter({ hasText: "your receiver answered 202" }).waitFor();
        const [arrived] = await eventually(async () => receiver.deliveries, (list) => list.length === 1, { what: "the test event at the receiver" });
        assert.equal(arrived!.json.type, "webhook.test");
        await owner.getByRole("button", { name: "Show the signing secret" }).click();
        const secret = (await owner.getByTestId("webhook-secret").textContent()) ?? "";
        new Webhook(secret).verify(arrived!.body, arrived!.headers); // throws unless signed with the secret on screen
        const row = owner.getByRole("table", { name: "Recent deliveries, most recent first" }).getByRole("row").filter({ hasText: "test event" });
        await row.waitFor();
        assert.match((await row.textContent()) ?? "", /delivered.*202/);
        await owner.screenshot({ path: join(SHOTS, "12-owner-webhook.png"), fullPage: true });
      });
    } finally {
      await ownerContext.close();
    }
  });

  it("when a job's webhook fails every retry, then the operator finds it among the dead letters and redelivers it once the receiver works", async () => {
    let failing = true;
    await withReceiver(() => (failing ? 503 : 200), async (receiver) => {
      const opened = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "hooks", balance: "1.00" } });
      const accountId = opened.json.account_id;
      await call(service, "PUT", `/admin/v1/accounts/${accountId}/webhook`, { admin: true, body: { url: receiver.url } });
      const key = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } });
      const job = await call(service, "POST", "/api/v1/generations", { key: key.json.api_key, body: { model: "aimodel-2.5-flash-image", prompt: "a kite" } });
      await receiver.awaitJob(job.json.job_id, 4);
      const operatorContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const operator = await operatorContext.newPage();
        await operator.goto(`${service.url}/panel/`);
        await operator.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
        await operator.getByRole("button", { name: "Sign in" }).click();
        // The dead letters table's row (the accounts list, the operator's home, names the account too).
        const row = operator.getByRole("table", { name: "Dead letters, most recent first" }).getByRole("row").filter({ hasText: accountId });
        await eventually(async () => {
          await operator.getByRole("link", { name: "Dead letters" }).click();
          return row.count();
        }, (count) => count === 1, { what: "the dead letter in the panel" });
        assert.match((await row.textContent()) ?? "", /failed.*503, 503, 503, 503/);
        await operator.screenshot({ path: join(SHOTS, "13-operator-dead-letters.png"), fullPage: true });
        failing = false;
        await row.getByRole("button", { name: /^Redeliver / }).click();
        await operator.locator("#notice").filter({ hasText: ": 200." }).waitFor();
        await row.waitFor({ state: "detached" });
        assert.equal(receiver.forJob(job.json.job_id).at(-1)!.json.status, "success");
      } finally {
        await operatorContext.close();
      }
    });
  });

  /** The account's keys as the operator's API lists them. */
  async function keysOf(accountId: string): Promise<{ keyId: string; models: string[]; revoked?: boolean }[]> {
    const listed = await rpc(service, "AdminService/ListAccountApiKeys", { accountId }, { authorization: `Bearer ${ADMIN_TOKEN}` });
    assert.equal(listed.status, 200, listed.text);
    return listed.json.keys ?? [];
  }

  it("when the owner creates a key, then no model is ticked at first, a key needs one, and a key of three models is refused a fourth (403)", async () => {
    const { page: owner, context: ownerContext, accountId } = await ownerPage(service, "4.00");
    try {
      await owner.getByRole("link", { name: "API keys" }).click();
      const createForm = owner.getByRole("form", { name: "Create an API key" });
      await createForm.waitFor();
      const ticked = await createForm.getByRole("checkbox").evaluateAll((boxes) => boxes.filter((box: any) => box.checked).length);
      assert.equal(ticked, 0, "no grant is ticked at first");
      assert.match((await owner.locator("#grant-rule").textContent()) ?? "", /Tick only the models the key needs/);
      await createForm.getByRole("button", { name: "Create key" }).click();
      await owner.locator("#notice[role=alert]").filter({ hasText: "Tick at least one model" }).waitFor();
      assert.deepEqual(await keysOf(accountId), [], "nothing was created");

      const three = ["aimodel-2.5-flash-image", "aimodel-3.1-flash-image", "aimodel-3-pro-image"];
      for (const model of three) await createForm.getByRole("checkbox", { name: model, exact: true }).check();
      await createForm.getByRole("button", { name: "Create key" }).click();
      const apiKey = (await owner.getByTestId("api-key-secret").textContent()) ?? "";
      await owner.getByRole("row").filter({ hasText: three.join(", ") }).waitFor();
      const [key] = await keysOf(accountId);
      assert.deepEqual(key!.models, three);

      const fourth = await call(service, "POST", "/api/v1/generations", { key: apiKey, body: { model: "aimodel-nbx-2.1", prompt: "a fourth model" } });
      assert.equal(fourth.status, 403, fourth.text);
      const statement = await allEntries(service, { accountId });
      assert.deepEqual(statement.map((e) => [e.type, e.amount, e.balance_after]), [["credit", "4.00", "4.00"]], "nothing held or charged");
      await owner.screenshot({ path: join(SHOTS, "14-owner-key-three-models.png"), fullPage: true });
    } finally {
      await ownerContext.close();
    }
  });

  it("when amounts have more than two decimals, then the panel shows cents with the exact value on hover, banners end with their screen, and job times filter in UTC", async () => {
    // A browser far from UTC: the filters must still mean UTC, as the table shows.
    const { page: owner, context: ownerContext, accountId } = await ownerPage(service, "24.8658345", { timezoneId: "America/New_York" });
    try {
      const available = owner.getByTestId("available");
      assert.equal(await available.textContent(), "$24.87");
      assert.equal(await available.getAttribute("title"), "$24.8658345");
      const credit = owner.getByTestId("statement").getByRole("row").filter({ hasText: "credit" });
      assert.equal(await credit.locator("span[title='$24.8658345']").count(), 2, "the amount and the balance after, exact on hover");

      await owner.getByRole("link", { name: "Jobs" }).click();
      const jobForm = owner.getByRole("form", { name: "Create a job" });
      await jobForm.getByLabel("Model").selectOption("aimodel-2.5-flash-image");
      await jobForm.getByLabel("Prompt").fill("a harbour at noon");
      await jobForm.getByRole("button", { name: "Create job" }).click();
      await owner.locator("#notice").filter({ hasText: "accepted" }).waitFor();
      await owner.getByTestId("job-status").filter({ hasText: "done" }).waitFor({ timeout: 20_000 });
      const list = owner.getByRole("table", { name: "Jobs, newest first" });
      const row = list.getByRole("row").filter({ hasText: "aimodel-2.5-flash-image" });
      await row.waitFor(); // listed at once, without a reload
      const statement = await allEntries(service, { accountId });
      const charge = statement.find((e) => e.type === "charge")!;
      assert.equal(await owner.getByTestId("job-charged").getAttribute("title"), `$${charge.amount.slice(1)}`);
      assert.equal(pico(charge.balance_after), pico("24.8658345") + pico(charge.amount));

      // The table's time is UTC; the filters read UTC too (a minute either side of it).
      const accepted = ((await row.getByRole("cell").nth(3).textContent()) ?? "").trim();
      assert.match(accepted, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      const shifted = (minutes: number) => new Date(Date.parse(`${accepted.replace(" ", "T")}Z`) + minutes * 60_000).toISOString().slice(0, 19);
      const filters = owner.getByRole("form", { name: "Filter jobs" });
      assert.ok(await filters.getByLabel("Accepted after (UTC)").isVisible());
      const listedWith = async (after: string, before: string) => {
        await filters.getByLabel("Accepted after (UTC)").fill(after);
        await filters.getByLabel("Accepted before (UTC)").fill(before);
        await applied(filters);
        return (await row.count()) === 1;
      };
      assert.equal(await listedWith(shifted(-1), shifted(1)), true, "accepted within a minute either side, in UTC");
      assert.equal(await listedWith(shifted(1), ""), false, "accepted before the minute after");
      assert.equal(await listedWith("", shifted(-1)), false, "accepted after the minute before");
      await owner.screenshot({ path: join(SHOTS, "15-owner-jobs-utc-filters.png"), fullPage: true });

      // A banner belongs to its screen: the next screen starts without it.
      await owner.locator("#notice").filter({ hasText: "accepted" }).waitFor();
      await owner.getByRole("link", { name: "Money" }).click();
      await owner.getByTestId("available").waitFor();
      assert.equal(await owner.locator("#notice").textContent(), "");
    } finally {
      await ownerContext.close();
    }
  });

  it("when the owner and two keys make text calls, then Text activity lists each with its model, key, tokens, exact charge and status, filtered by key, model and UTC time", async () => {
    const { page: owner, context: ownerContext, accountId } = await ownerPage(service, "5.00");
    try {
      const keyA = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } });
      const keyB = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: ["*"] } });
      for (const [key, prompt] of [[keyA, "Say hello"], [keyB, "Say goodbye in three words"]] as const) {
        const answered = await call(service, "POST", `/api/aimodel/v1beta/models/${TEXT}:generateContent`, {
          vendorKey: key.json.api_key, body: { contents: [{ parts: [{ text: prompt }] }] },
        });
        assert.equal(answered.status, 200, answered.text);
      }
      const calls = await allEntries(service, { accountId }, 100, "source=text_call&type=charge,release");
      assert.equal(calls.length, 2);

      await owner.getByRole("link", { name: "Text activity" }).click();
      const table = owner.getByTestId("text-calls");
      await eventually(async () => table.locator("tbody tr").count(), (count) => count === 2, { what: "two text calls" });
      for (const entry of calls) {
        const row = table.getByRole("row").filter({ hasText: entry.key_id! });
        const cells = await row.getByRole("cell").allTextContents();
        assert.deepEqual(cells.slice(1, 5), [TEXT, entry.key_id, String(entry.prompt_token_count), String(entry.candidates_token_count)]);
        assert.equal(cells[6], "charged");
        assert.equal(await row.getByRole("cell").nth(5).locator("span").getAttribute("title"), `$${entry.amount.slice(1)}`);
        assert.equal(cells[0], entry.created_at.replace("T", " ").slice(0, 19));
      }
      const filters = owner.getByRole("form", { name: "Filter text calls" });
      await filters.getByLabel("Key").fill(keyB.json.key_id);
      await applied(filters);
      assert.equal(await table.locator("tbody tr").count(), 1, "the calls of one key");
      assert.match((await table.locator("tbody tr").textContent()) ?? "", new RegExp(keyB.json.key_id));
      await owner.screenshot({ path: join(SHOTS, "16-owner-text-activity.png"), fullPage: true });
      await filters.getByLabel("Key").fill("");
      await filters.getByLabel("Model").selectOption("aimodel-2.5-flash-image");
      await applied(filters);
      await table.getByText("No text calls.").waitFor();
      await filters.getByLabel("Model").selectOption(TEXT);
      const newest = calls[0]!.created_at;
      await filters.getByLabel("From (UTC)").fill(newest.slice(0, 19));
      await applied(filters);
      const shown = await table.locator("tbody tr td:first-child").allTextContents();
      assert.ok(shown.every((time) => time >= newest.replace("T", " ").slice(0, 19)), shown.join());
    } finally {
      await ownerContext.close();
    }
  });

  it("when every screen is opened on a desktop and a phone, then each is saved as a screenshot and none overflows the phone sideways", async () => {
    const sizes = [["desktop", { width: 1280, height: 800 }], ["phone", { width: 390, height: 844 }]] as const;
    for (const [size, viewport] of sizes) {
      const operatorContext = await browser.newContext({ viewport, isMobile: size === "phone", hasTouch: size === "phone" });
      try {
        const operator = await operatorContext.newPage();
        await operator.goto(`${service.url}/panel/`);
        await operator.getByLabel("Owner token or admin token").waitFor();
        await operator.screenshot({ path: join(SHOTS, `${size}-sign-in.png`), fullPage: true });
        await operator.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
        await operator.getByRole("button", { name: "Sign in" }).click();
        await visitEvery(operator, size, "operator");
        await operator.locator("#nav a[href='#/accounts']").click();
        await operator.locator("main tbody a").first().click();
        await operator.getByTestId("operator-available").waitFor();
        await operator.waitForLoadState("networkidle");
        const overflow = (await operator.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
        assert.ok(overflow <= 0, `the operator's account page is ${overflow} px wider than the ${size} screen`);
        await operator.screenshot({ path: join(SHOTS, `${size}-operator-account.png`), fullPage: true });
      } finally {
        await operatorContext.close();
      }
      const { page: owner, context: ownerContext } = await ownerPage(service, "3.00", { viewport });
      try {
        await visitEvery(owner, size, "owner");
      } finally {
        await ownerContext.close();
      }
    }
  });

  /** A CSV the page downloads when `button` is pressed, as text; checked against the statement the API answers. */
  async function downloadedStatement(target: Page, button: ReturnType<Page["getByRole"]>, accountId: string): Promise<void> {
    const [download] = await Promise.all([target.waitForEvent("download"), button.click()]);
    assert.match(download.suggestedFilename(), /^ledger(-acct_[\w-]+)?\.csv$/);
    const lines = (await readFile((await download.path())!, "utf8")).split("\r\n").filter((line) => line !== "");
    assert.match(lines[0]!, /^entry_id,type,amount,balance_after,reserved_change,reserved_after,job_id,model,key_id,/);
    const entries = await allEntries(service, { accountId });
    assert.ok(entries.length > 0);
    assert.deepEqual(lines.slice(1).map((line) => line.split(",").slice(0, 4)), entries.map((e) => [e.entry_id, e.type, e.amount, e.balance_after]));
  }

  /** Signs in as the operator in a new context. */
  async function operatorPage(viewport = { width: 1280, height: 800 }): Promise<{ page: Page; context: BrowserContext }> {
    const operatorContext = await browser.newContext({ viewport, acceptDownloads: true });
    const operator = await operatorContext.newPage();
    operator.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    await operator.goto(`${service.url}/panel/`);
    await operator.getByLabel("Owner token or admin token").fill(ADMIN_TOKEN);
    await operator.getByRole("button", { name: "Sign in" }).click();
    await operator.getByRole("form", { name: "Find an account" }).waitFor();
    return { page: operator, context: operatorContext };
  }

  it("when the operator finds an account by name and by id, edits and rotates its key, downloads its statement and pauses a model, then the API and the audit page agree", async () => {
    const name = `Findme ${Date.now().toString(36)}`;
    const opened = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name, balance: "6.125" } });
    const accountId: string = opened.json.account_id;
    const kept = "aimodel-2.5-flash-image";
    const removed = "aimodel-3.1-flash-image";
    const key = await call(service, "POST", `/admin/v1/accounts/${accountId}/keys`, { admin: true, body: { models: [kept, removed] } });
    const keyId: string = key.json.key_id;
    const hook = "http://127.0.0.1:9/operator-hook";
    const hooked = await call(service, "PUT", `/admin/v1/accounts/${accountId}/webhook`, { admin: true, body: { url: hook } });
    assert.equal(hooked.status, 200, hooked.text);
    const { page: operator, context: operatorContext } = await operatorPage();
    try {
      const search = operator.getByRole("form", { name: "Find an account" });
      const row = operator.getByRole("row").filter({ hasText: accountId });
      for (const q of [name.slice(0, 9).toUpperCase(), accountId.slice(0, -1)]) {
        await search.getByLabel("Find an account").fill(q);
        await search.getByRole("button", { name: "Search" }).click();
        await eventually(() => operator.locator("main tbody tr").count(), (count) => count === 1, { what: `only ${accountId} starting with ${q}` });
        await row.waitFor();
      }
      const cells = await row.getByRole("cell").allTextContents();
      assert.deepEqual(cells.slice(0, 5), [name, accountId, "$6.13", "$0.00", "0"]);
      assert.equal(cells[6], "active");
      assert.equal(await row.getByRole("cell").nth(2).locator("span").getAttribute("title"), "$6.125");
      await operator.screenshot({ path: join(SHOTS, "17-operator-account-search.png"), fullPage: true });
      await row.getByRole("link", { name }).click();
      assert.equal(await operator.getByTestId("operator-available").textContent(), "$6.13");
      assert.equal(await operator.getByTestId("operator-webhook").textContent(), hook, "the account page shows its webhook");

      // Its key: the grants narrowed (the removed model is 403 at once), then a new secret with no grace.
      // In the keys table: the audit entries below name the key too (its key.created).
      const keyRow = operator.getByRole("table", { name: `Keys of ${accountId}` }).getByRole("row").filter({ hasText: keyId });
      await keyRow.getByText("Edit", { exact: true }).click();
      const edit = operator.getByRole("form", { name: `Edit ${keyId}` });
      await edit.getByLabel("Name").fill("render farm");
      await edit.getByRole("checkbox", { name: removed, exact: true }).uncheck();
      await edit.getByRole("button", { name: "Save key" }).click();
      await operator.locator("#notice").filter({ hasText: `Key ${keyId} saved` }).waitFor();
      assert.match((await keyRow.textContent()) ?? "", new RegExp(`^render farm${keyId}${kept}none`));
      const refused = await call(service, "POST", "/api/v1/generations", { key: key.json.api_key, body: { model: removed, prompt: "a removed model" } });
      assert.equal(refused.status, 403, refused.text);
      assert.deepEqual((await keysOf(accountId)).map((k) => k.models), [[kept]]);

      await keyRow.getByText("Rotate", { exact: true }).click();
      await operator.getByRole("form", { name: `Rotate ${keyId}` }).getByRole("button", { name: "Rotate secret" }).click();
      const rotated = operator.getByTestId("api-key-secret");
      await rotated.waitFor();
      const secret = (await rotated.textContent()) ?? "";
      assert.match(secret, /^gsk_/);
      assert.equal((await call(service, "GET", "/api/v1/balance", { key: key.json.api_key })).status, 401, "the old secret is refused at once");
      assert.equal((await call(service, "GET", "/api/v1/balance", { key: secret })).status, 200, "the new secret works");
      await operator.screenshot({ path: join(SHOTS, "18-operator-account.png"), fullPage: true });

      await downloadedStatement(operator, operator.getByRole("button", { name: "Download the statement (CSV)" }), accountId);
      await operator.locator("#notice").filter({ hasText: `Downloaded ledger-${accountId}.csv.` }).waitFor();

      // A pause is audited: who, from where, before and after.
      const model = "aimodel-nbx-2.1";
      await operator.getByRole("link", { name: "Pauses, prices, routes" }).click();
      await operator.getByRole("button", { name: `Pause ${model}` }).click();
      await operator.getByRole("button", { name: `Resume ${model}` }).click();
      await operator.getByRole("button", { name: `Pause ${model}` }).waitFor();
      await operator.getByRole("link", { name: "Audit" }).click();
      const filters = operator.getByRole("form", { name: "Filter audit entries" });
      await filters.getByLabel("Kind").fill("model.paused");
      await filters.getByLabel("Actor").fill("admin");
      await applied(filters);
      const entries = operator.getByTestId("audit").locator("tbody tr").filter({ hasText: model });
      assert.equal(await entries.count(), 2, "the pause and the resume");
      const newest = await entries.first().getByRole("cell").allTextContents();
      assert.deepEqual(newest.slice(1, 4), ["model.paused", "admin", "127.0.0.1"]);
      assert.match(newest[6]!, /true.*→.*false/);
      await operator.screenshot({ path: join(SHOTS, "19-operator-audit.png"), fullPage: true });
      assert.deepEqual(problems, []);
    } finally {
      await operatorContext.close();
    }
  });

  it("when the owner names a key, narrows its models, rotates it, sets the webhook and downloads the statement, then the API, the audit page and the file agree", async () => {
    const { page: owner, context: ownerContext, accountId } = await ownerPage(service, "4.50", { acceptDownloads: true });
    const kept = "aimodel-2.5-flash-image";
    const removed = "aimodel-3.1-flash-image";
    try {
      await owner.getByRole("link", { name: "API keys" }).click();
      const createForm = owner.getByRole("form", { name: "Create an API key" });
      await createForm.getByLabel("Name").fill("build bot");
      for (const model of [kept, removed]) await createForm.getByRole("checkbox", { name: model, exact: true }).check();
      await createForm.getByRole("button", { name: "Create key" }).click();
      const oldSecret = (await owner.getByTestId("api-key-secret").textContent()) ?? "";
      const row = owner.getByRole("row").filter({ hasText: "build bot" });
      await row.waitFor();
      const [created] = await keysOf(accountId);
      assert.equal((created as { name?: string }).name, "build bot");

      await row.getByText("Edit", { exact: true }).click();
      const edit = owner.getByRole("form", { name: `Edit ${created!.keyId}` });
      await edit.getByRole("checkbox", { name: removed, exact: true }).uncheck();
      await edit.getByRole("button", { name: "Save key" }).click();
      await owner.locator("#notice").filter({ hasText: "saved" }).waitFor();
      const refused = await call(service, "POST", "/api/v1/generations", { key: oldSecret, body: { model: removed, prompt: "a removed model" } });
      assert.equal(refused.status, 403, refused.text);

      await row.getByText("Rotate", { exact: true }).click();
      const rotate = owner.getByRole("form", { name: `Rotate ${created!.keyId}` });
      await rotate.getByLabel("Grace (seconds)").fill("300");
      await rotate.getByRole("button", { name: "Rotate secret" }).click();
      await owner.locator("#notice").filter({ hasText: "rotated" }).waitFor();
      const newSecret = (await owner.getByTestId("api-key-secret").textContent()) ?? "";
      assert.notEqual(newSecret, oldSecret);
      assert.match((await row.textContent()) ?? "", /old secret until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
      for (const secret of [oldSecret, newSecret]) assert.equal((await call(service, "GET", "/api/v1/balance", { key: secret })).status, 200, "both work during the grace");
      await owner.screenshot({ path: join(SHOTS, "20-owner-key-rotated.png"), fullPage: true });

      await withReceiver(() => 204, async (receiver) => {
        await owner.getByRole("link", { name: "Webhook" }).click();
        await owner.getByRole("textbox", { name: "URL", exact: true }).fill(receiver.url);
        await owner.getByRole("button", { name: "Save URL" }).click();
        await owner.locator("#notice").filter({ hasText: "Webhook URL saved." }).waitFor();
      });
      await owner.getByRole("link", { name: "Audit" }).click();
      const entry = owner.getByTestId("audit").locator("tbody tr").filter({ hasText: "webhook.set" });
      await entry.waitFor();
      const cells = await entry.getByRole("cell").allTextContents();
      assert.deepEqual(cells.slice(2, 5), [`owner:${accountId}`, "127.0.0.1", accountId]);
      await owner.screenshot({ path: join(SHOTS, "21-owner-audit.png"), fullPage: true });

      await owner.getByRole("link", { name: "Money" }).click();
      await downloadedStatement(owner, owner.getByRole("button", { name: "Download the statement (CSV)" }), accountId);
    } finally {
      await ownerContext.close();
    }
  });

  /** The audit events of an account of one kind, as the API answers them (GET /admin/v1/audit). */
  async function auditOf(accountId: string, kind: string): Promise<{ actor: string; before: string | null; after: string | null }[]> {
    const response = await call(service, "GET", `/admin/v1/audit?account_id=${accountId}&kind=${kind}`, { admin: true });
    assert.equal(response.status, 200, response.text);
    return response.json.events;
  }

  /** Saves the current page at the phone's size too (390x844) and checks that it fits, then goes back to the desktop's. */
  async function phoneShot(target: Page, name: string): Promise<void> {
    await target.setViewportSize({ width: 390, height: 844 });
    const overflow = (await target.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
    assert.ok(overflow <= 0, `${name} is ${overflow} px wider than the phone's screen`);
    await target.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
    await target.setViewportSize({ width: 1280, height: 800 });
  }

  it("when the operator finds an account by name, credits it with a reason, debits it with a reason and renames it, then the figures, the statement, the audit page and the API agree", async () => {
    const name = `Adjustme ${Date.now().toString(36)}`;
    const opened = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name, balance: "10.00" } });
    const accountId: string = opened.json.account_id;
    const { page: operator, context: operatorContext } = await operatorPage();
    try {
      const search = operator.getByRole("form", { name: "Find an account" });
      await search.getByLabel("Find an account").fill(name.toLowerCase());
      await search.getByRole("button", { name: "Search" }).click();
      await operator.getByRole("row").filter({ hasText: accountId }).getByRole("link", { name }).click();
      const available = operator.getByTestId("operator-available");
      await available.waitFor();
      const notice = operator.locator("#notice");

      const credit = operator.getByRole("form", { name: `Credit ${accountId}` });
      await credit.getByLabel("Amount (USD)").fill("2.505");
      await credit.getByLabel("Reason (optional)").fill("goodwill for the outage");
      await credit.getByRole("button", { name: "Add credit" }).click();
      await notice.filter({ hasText: `Credited ${accountId}.` }).waitFor();
      await eventually(() => available.textContent(), (text) => text === "$12.51", { what: "the credited figures" });
      assert.equal(await available.getAttribute("title"), "$12.505");

      // The adjustment: refused ones say why (409, 422) and move nothing; the debit then updates figures and statement in place.
      const adjust = operator.getByRole("form", { name: `Adjust ${accountId}` });
      await adjust.getByLabel("Direction").selectOption("debit");
      await adjust.getByLabel("Adjustment (USD)").fill("100");
      await adjust.getByLabel("Reason", { exact: true }).fill("too much");
      await adjust.getByRole("button", { name: "Adjust balance" }).click();
      await operator.getByRole("alert").filter({ hasText: /^409 insufficient_funds: / }).waitFor();
      await adjust.getByLabel("Reason", { exact: true }).fill("   ");
      await adjust.getByRole("button", { name: "Adjust balance" }).click();
      await operator.getByRole("alert").filter({ hasText: /^422 invalid_reason: / }).waitFor();
      assert.equal(await available.getAttribute("title"), "$12.505", "a refused adjustment moves nothing");
      await adjust.getByLabel("Adjustment (USD)").fill("1.25");
      await adjust.getByLabel("Reason", { exact: true }).fill("refund of a duplicate charge");
      await adjust.getByRole("button", { name: "Adjust balance" }).click();
      await notice.filter({ hasText: `Adjusted ${accountId} by -1.25 USD.` }).waitFor();
      await eventually(() => available.getAttribute("title"), (title) => title === "$11.255", { what: "the adjusted figures" });
      assert.equal(await available.textContent(), "$11.26");
      const newest = operator.getByTestId("statement").locator("tbody tr").first();
      await eventually(() => newest.getByRole("cell").allTextContents(), (cells) => cells[1] === "adjustmentrefund of a duplicate charge", { what: "the adjustment in the statement" });
      assert.deepEqual((await newest.getByRole("cell").allTextContents()).slice(2, 4), ["-$1.25", "$11.26"]);
      const entries = await allEntries(service, { accountId }, 100, "type=adjustment");
      assert.deepEqual(entries.map((e) => [e.type, e.amount, e.balance_after, (e as { adjustment_reason?: string }).adjustment_reason]),
        [["adjustment", "-1.25", "11.255", "refund of a duplicate charge"]]);

      // Settings: renamed; a threshold above available, then cleared.
      const settings = operator.getByRole("form", { name: `Settings of ${accountId}` });
      const renamed = `${name} renamed`;
      await settings.getByLabel("Account name").fill(renamed);
      await settings.getByLabel("Low-balance threshold (USD)").fill("20.00");
      await settings.getByRole("button", { name: "Save settings" }).click();
      await notice.filter({ hasText: "Settings saved." }).waitFor();
      await operator.getByRole("heading", { name: renamed, level: 2 }).waitFor();
      assert.match((await operator.getByTestId("threshold-state").textContent()) ?? "", /below it now/);
      await operator.getByText("low balance", { exact: true }).waitFor();
      let got = await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true });
      assert.deepEqual([got.json.name, got.json.low_balance_threshold, got.json.low_balance], [renamed, "20.00", true]);
      await operator.screenshot({ path: join(SHOTS, "22-operator-account-adjusted.png"), fullPage: true });
      await phoneShot(operator, "22-operator-account-adjusted");
      await settings.getByRole("button", { name: "Clear the threshold" }).click();
      await notice.filter({ hasText: "Low-balance alert removed." }).waitFor();
      assert.equal(await operator.getByTestId("threshold-state").textContent(), "No low-balance alert is set.");
      got = await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true });
      assert.deepEqual([got.json.name, got.json.low_balance_threshold, got.json.low_balance], [renamed, null, false]);

      // The audit page shows both money changes with their reasons; the API says the same.
      await operator.getByRole("link", { name: "Audit" }).click();
      const filters = operator.getByRole("form", { name: "Filter audit entries" });
      await filters.getByLabel("Account").fill(accountId);
      await applied(filters);
      const rows = operator.getByTestId("audit").locator("tbody tr");
      for (const [kind, reason] of [["credit.added", "goodwill for the outage"], ["balance.adjusted", "refund of a duplicate charge"]] as const) {
        const row = rows.filter({ hasText: kind });
        assert.equal(await row.count(), 1, kind);
        const cells = await row.getByRole("cell").allTextContents();
        assert.deepEqual(cells.slice(1, 3), [kind, "admin"]);
        assert.ok(cells.join(" ").includes(reason), `${kind} shows its reason: ${cells.join(" | ")}`);
        const [event, ...more] = await auditOf(accountId, kind);
        assert.equal(more.length, 0);
        assert.equal(event!.actor, "admin");
        assert.equal(JSON.parse(event!.after!).reason, reason);
      }
      assert.equal(JSON.parse((await auditOf(accountId, "balance.adjusted"))[0]!.after!).amount, "-1.25");
      await operator.screenshot({ path: join(SHOTS, "23-operator-audit-money.png"), fullPage: true });
      await phoneShot(operator, "23-operator-audit-money");
      assert.deepEqual(await unlabelledIn(operator), []);
      assert.deepEqual(problems, []);
    } finally {
      await operatorContext.close();
    }
  });

  it("when the owner sets a low-balance threshold above the balance, then a banner shows on every screen until the operator's credit lifts available above it", async () => {
    const { page: owner, context: ownerContext, accountId } = await ownerPage(service, "5.00", { viewport: { width: 1280, height: 800 } });
    const banner = owner.locator("#low-balance");
    try {
      assert.equal(await banner.isHidden(), true);
      const settings = owner.getByRole("form", { name: "Account settings" });
      await settings.getByLabel("Account name").fill("Owner's studio");
      await settings.getByLabel("Low-balance threshold (USD)").fill("8.00");
      await settings.getByRole("button", { name: "Save settings" }).click();
      await owner.locator("#notice").filter({ hasText: "Settings saved." }).waitFor();
      await banner.waitFor();
      assert.equal(await banner.textContent(), "Low balance: $5.00 available, below your alert threshold of $8.00. New jobs stop when it runs out: ask your operator for credit.");
      const got = await call(service, "GET", `/admin/v1/accounts/${accountId}`, { admin: true });
      assert.deepEqual([got.json.name, got.json.low_balance_threshold, got.json.low_balance], ["Owner's studio", "8.00", true]);
      await owner.screenshot({ path: join(SHOTS, "24-owner-low-balance.png"), fullPage: true });
      await phoneShot(owner, "24-owner-low-balance");
      for (const screen of ["Jobs", "API keys"]) {
        await owner.getByRole("link", { name: screen }).click();
        await owner.locator("main h1").filter({ hasText: screen }).waitFor();
        await banner.waitFor();
      }

      // The operator credits it above the threshold (its adjustment reaches the owner's statement with the reason).
      const adjusted = await call(service, "POST", `/admin/v1/accounts/${accountId}/adjustments`, { admin: true, body: { amount: "4.00", reason: "top-up after the alert" } });
      assert.equal(adjusted.status, 201, adjusted.text);
      await owner.getByRole("link", { name: "Money" }).click();
      await eventually(() => banner.isHidden(), (hidden) => hidden, { what: "the banner gone" });
      assert.equal(await owner.getByTestId("available").textContent(), "$9.00");
      const newest = owner.getByTestId("statement").locator("tbody tr").first();
      assert.deepEqual((await newest.getByRole("cell").allTextContents()).slice(1, 3), ["adjustmenttop-up after the alert", "$4.00"]);
      await owner.getByRole("link", { name: "Jobs" }).click();
      await owner.locator("main h1").filter({ hasText: "Jobs" }).waitFor();
      await owner.waitForLoadState("networkidle");
      assert.equal(await banner.isHidden(), true, "no banner on the next screens");
      assert.deepEqual(await unlabelledIn(owner), []);
      assert.deepEqual(problems, []);
    } finally {
      await ownerContext.close();
    }
  });

  /** Applies a filter form: its button is busy from the click until the list is read again. */
  async function applied(filters: ReturnType<Page["getByRole"]>): Promise<void> {
    const apply = filters.getByRole("button", { name: "Apply filters" });
    await apply.click();
    await eventually(() => apply.isEnabled(), (enabled) => enabled, { what: "the filtered list" });
  }

  /** Opens every screen of the navigation, saves it, and checks that it fits the width. */
  async function visitEvery(target: Page, size: string, role: string): Promise<void> {
    await target.locator("#nav a[aria-current=page]").waitFor(); // signed in: the navigation is there
    const links = await target.locator("#nav a").evaluateAll((anchors) => anchors.map((a: any) => [a.getAttribute("href"), a.textContent]));
    assert.ok(links.length >= 4, `${role} has screens`);
    for (const [href, title] of links as [string, string][]) {
      await target.locator(`#nav a[href='${href}']`).click();
      await target.locator("main h1").filter({ hasText: new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) }).waitFor();
      await target.waitForLoadState("networkidle");
      const overflow = (await target.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
      assert.ok(overflow <= 0, `${role}'s ${title} is ${overflow} px wider than the ${size} screen`);
      assert.equal(await target.locator("main [role=alert]").count(), 0, `${role}'s ${title} loaded without an error`);
      await target.screenshot({ path: join(SHOTS, `${size}-${role}-${href.replace("#/", "")}.png`), fullPage: true });
    }
  }
});

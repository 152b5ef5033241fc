import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Job } from "../../../gen/generation/v1/job_pb.js";
import { JobStatus } from "../../../gen/generation/v1/job_pb.js";
import { ModelKind, type Model } from "../../../gen/generation/v1/model_pb.js";
import { generation, text as textApi } from "../rpc.js";
import { act, failureText, field, form, fromUtcField, h, say, section, table, usd, utc, utcField } from "../ui.js";
import { loadModels } from "./prices.js";

const STATUS: Record<number, string> = {
  [JobStatus.QUEUED]: "queued", [JobStatus.PROCESSING]: "processing", [JobStatus.DONE]: "done",
  [JobStatus.FAILED]: "failed", [JobStatus.CANCELED]: "canceled",
};
const FINISHED = new Set([JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELED]);
const when = (timestamp: Timestamp | undefined) => utc(timestamp ? timestampDate(timestamp) : undefined);

function select(name: string, options: [string, string][], label: string, hint?: string): HTMLElement {
  return field(label, h("select", { name }, ...options.map(([value, text]) => h("option", { value }, text))), hint);
}

/** One job: its timeline, what it produced (the picture or the video inline), and cancel while it runs. */
export function jobDetail(jobId: string, onChange: () => void): HTMLElement {
  const box = h("div", { class: "job", "data-testid": "job-detail", "aria-live": "polite" }, h("p", {}, "Loading…"));
  const watching = new AbortController();

  const render = (job: Job) => {
    const status = STATUS[job.status] ?? "unknown";
    const cancel = h("button", { type: "button", class: "danger" }, "Cancel job");
    cancel.addEventListener("click", () => void act(cancel, async () => {
      const { job: canceled } = await generation.cancelJob({ jobId });
      if (canceled) render(canceled);
      say(`Job ${jobId} canceled.`);
      onChange();
    }));
    const result = job.result;
    const media = result?.imageUrl
      ? (result.mimeType?.startsWith("video/")
        ? h("video", { src: result.imageUrl, controls: true, "aria-label": `Video made by job ${jobId}`, class: "media" })
        : h("img", { src: result.imageUrl, alt: `Image made by job ${jobId}`, class: "media", "data-testid": "job-image" }))
      : undefined;
    const parts: (Node | undefined)[] = [
      h("h3", {}, "Job ", h("code", {}, jobId)),
      h("p", {}, "Status ", h("strong", { "data-testid": "job-status" }, status), ` · ${job.model}`),
      h("ol", { class: "timeline", "aria-label": "Timeline" },
        h("li", {}, `Accepted ${when(job.createdAt)}`),
        h("li", {}, `Started ${when(job.startedAt)}`),
        h("li", {}, `Finished ${when(job.finishedAt)}`)),
      h("p", {}, "Reserved ", usd(job.usage?.reserved), " · charged ", usd(job.usage?.charged, { "data-testid": "job-charged" }),
        job.usage?.totalTokenCount ? ` · ${job.usage.promptTokenCount} + ${job.usage.candidatesTokenCount} tokens` : ""),
      job.error ? h("p", { role: "alert" }, `${job.error}: ${job.errorMessage ?? ""}`) : undefined,
      media,
      result?.text ? h("pre", { class: "text-result" }, result.text) : undefined,
      FINISHED.has(job.status) ? undefined : cancel,
    ];
    box.replaceChildren(...parts.filter((part): part is Node => part !== undefined));
  };

  // The job's states as they happen (WatchJob: a server stream over the same session).
  void (async () => {
    try {
      for await (const event of generation.watchJob({ jobId }, { signal: watching.signal })) {
        if (event.job) render(event.job);
        if (event.job && FINISHED.has(event.job.status)) onChange();
      }
    } catch (error) {
      if (!watching.signal.aborted) box.append(h("p", { role: "alert" }, failureText(error)));
    }
  })();
  // Stops watching when the detail leaves the page.
  const observer = new MutationObserver(() => {
    if (!box.isConnected) {
      watching.abort();
      observer.disconnect();
    }
  });
  queueMicrotask(() => observer.observe(document.body, { childList: true, subtree: true }));
  return box;
}

function createForm(models: Model[], onCreated: (jobId: string) => void): HTMLElement {
  const creatable = models.filter((model) => model.kind !== ModelKind.MULTIMODAL_REALTIME);
  const extras = h("div", { class: "extras" });
  const modelSelect = h("select", { name: "model" }, ...creatable.map((model) => h("option", { value: model.id }, model.id)));
  const showExtras = () => {
    const model = creatable.find((m) => m.id === modelSelect.value);
    const children: HTMLElement[] = [];
    if (model && model.resolutions.length > 0) children.push(select("resolution", [["", "default"], ...model.resolutions.map((r) => [r, r] as [string, string])], "Resolution"));
    if (model && model.aspectRatios.length > 0 && model.kind !== ModelKind.TEXT) {
      children.push(select("aspect_ratio", [["", "default"], ...model.aspectRatios.map((r) => [r, r] as [string, string])], "Aspect ratio"));
    }
    if (model?.kind === ModelKind.VIDEO) children.push(select("duration", model.durationsSeconds.map((d) => [String(d), `${d} s`] as [string, string]), "Duration"));
    extras.replaceChildren(...children);
  };
  modelSelect.addEventListener("change", showExtras);
  showExtras();
  return form("Create a job", [
    field("Model", modelSelect),
    field("Prompt", h("textarea", { name: "prompt", required: true, rows: 3 })),
    extras,
  ], "Create job", async (data) => {
    const text = (name: string) => String(data.get(name) ?? "");
    const created = await generation.createGeneration({
      model: text("model"), prompt: text("prompt"),
      ...(text("resolution") ? { resolution: text("resolution") } : {}),
      ...(text("aspect_ratio") ? { aspectRatio: text("aspect_ratio") } : {}),
      ...(text("duration") ? { durationSeconds: Number(text("duration")) } : {}),
      idempotencyKey: crypto.randomUUID(),
    });
    say(`Job ${created.jobId} accepted.`);
    onCreated(created.jobId);
  });
}

export async function jobsView(selected: string | undefined): Promise<HTMLElement> {
  const models = await loadModels();
  const list = h("div", {});
  const detail = h("div", {});
  const open = (jobId: string) => {
    history.replaceState(null, "", `#/jobs/${jobId}`);
    detail.replaceChildren(jobDetail(jobId, () => void load(lastFilters)));
    detail.scrollIntoView({ block: "nearest" });
  };
  let lastFilters = new FormData();
  const load = async (filters: FormData) => {
    lastFilters = filters;
    const status = Number(filters.get("status") ?? 0);
    const model = String(filters.get("model") ?? "");
    const after = fromUtcField(String(filters.get("after") ?? ""));
    const before = fromUtcField(String(filters.get("before") ?? ""));
    const { jobs } = await generation.listJobs({
      status, model, limit: 50,
      ...(after ? { createdAfter: timestampFromDate(after) } : {}),
      ...(before ? { createdBefore: timestampFromDate(before) } : {}),
    });
    list.replaceChildren(table(["Job", "Model", "Status", "Accepted (UTC)", "Charged"], jobs.map((job) => [
      h("button", { type: "button", class: "link", onclick: () => open(job.jobId) }, job.jobId.slice(0, 8)),
      job.model, STATUS[job.status] ?? "", when(job.createdAt), usd(job.usage?.charged),
    ]), "Jobs, newest first"));
  };
  const filters = form("Filter jobs", [
    h("div", { class: "row" },
      select("status", [["0", "any"], ...Object.entries(STATUS).map(([value, text]) => [value, text] as [string, string])], "Status"),
      select("model", [["", "any"], ...models.map((m) => [m.id, m.id] as [string, string])], "Model"),
      utcField("Accepted after", "after"),
      utcField("Accepted before", "before")),
  ], "Apply filters", (data) => load(data));
  await load(lastFilters);
  if (selected) open(selected);
  return h("div", {},
    section("New job", createForm(models, (jobId) => {
      open(jobId);
      void load(lastFilters);
    })),
    detail,
    section("Your jobs", filters, list));
}

/** Text streamed as it is produced (TextService.StreamGenerateContent, the vendor's wire format, over the session). */
export async function playgroundView(): Promise<HTMLElement> {
  const models = (await loadModels()).filter((model) => model.kind === ModelKind.TEXT);
  const output = h("output", { class: "stream", "aria-live": "polite", "data-testid": "stream-output" });
  const usage = h("p", { class: "hint" });
  return section("Streaming text",
    h("p", {}, "The answer appears as the model produces it. The call holds the most it can cost and is charged what it used."),
    form("Stream text", [
      field("Model", h("select", { name: "model" }, ...models.map((m) => h("option", { value: m.id }, m.id)))),
      field("Prompt", h("textarea", { name: "prompt", required: true, rows: 3 })),
    ], "Send", async (data) => {
      output.textContent = "";
      usage.textContent = "";
      const request = { model: String(data.get("model")), contents: [{ role: "user", parts: [{ data: { case: "text" as const, value: String(data.get("prompt")) } }] }] };
      for await (const { chunk } of textApi.streamGenerateContent({ request })) {
        for (const part of chunk?.candidates[0]?.content?.parts ?? []) if (part.data.case === "text") output.textContent += part.data.value;
        if (chunk?.usageMetadata) usage.textContent = `${chunk.usageMetadata.promptTokenCount} prompt + ${chunk.usageMetadata.candidatesTokenCount} output tokens`;
      }
    }),
    output, usage);
}

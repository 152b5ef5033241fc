import type { Model } from "../../../gen/generation/v1/model_pb.js";
import { admin } from "../rpc.js";
import { act, field, form, h, input, say, section, table } from "../ui.js";
import { loadModels, priceLines } from "./prices.js";

/** Pauses (project, models), prices and upstream routes. */
export async function controlsView(refresh: () => void): Promise<HTMLElement> {
  const [models, { routes }] = await Promise.all([loadModels(), admin.listRoutes({})]);
  const toggle = (label: string, paused: boolean, run: (paused: boolean) => Promise<void>) => {
    const button = h("button", { type: "button", "aria-pressed": paused ? "true" : "false", class: paused ? "danger" : "" }, paused ? `Resume ${label}` : `Pause ${label}`);
    button.addEventListener("click", () => void act(button, async () => {
      await run(!paused);
      say(`${label} ${paused ? "resumed" : "paused"}.`);
      refresh();
    }));
    return button;
  };
  const projectButton = (label: string, paused: boolean) => {
    const button = h("button", { type: "button", class: paused ? "danger" : "" }, label);
    button.addEventListener("click", () => void act(button, async () => {
      await admin.setProjectPaused({ paused });
      say(paused ? "The project is paused." : "The project runs.");
    }));
    return button;
  };
  const priceForm = (model: Model) => {
    const p = model.price;
    const entries: [string, string, string][] = [
      ...Object.entries(p?.perImage ?? {}).map(([r, v]) => [`image:${r}`, `Per image at ${r}`, v] as [string, string, string]),
      ...Object.entries(p?.perSecond ?? {}).map(([r, v]) => [`second:${r}`, `Per second at ${r}`, v] as [string, string, string]),
      ...(p?.inputPerMillionTokens ? [["input", "Per 1M input tokens", p.inputPerMillionTokens] as [string, string, string]] : []),
      ...(p?.outputPerMillionTokens ? [["output", "Per 1M output tokens", p.outputPerMillionTokens] as [string, string, string]] : []),
      ...(p?.videoOutputPerMillionTokens ? [["video", "Per 1M video-output tokens", p.videoOutputPerMillionTokens] as [string, string, string]] : []),
    ];
    return h("details", {}, h("summary", {}, "Edit prices"), form(`Prices of ${model.id}`,
      entries.map(([name, label, value]) => field(label, input(name, { value, inputmode: "decimal", autocomplete: "off" }))), "Save prices", async (data) => {
        const perImage: Record<string, string> = {};
        const perSecond: Record<string, string> = {};
        for (const [name] of entries) {
          const value = String(data.get(name));
          if (name.startsWith("image:")) perImage[name.slice(6)] = value;
          if (name.startsWith("second:")) perSecond[name.slice(7)] = value;
        }
        await admin.updatePrice({ price: {
          model: model.id, perImage, perSecond,
          inputPerMillionTokens: String(data.get("input") ?? ""), outputPerMillionTokens: String(data.get("output") ?? ""),
          videoOutputPerMillionTokens: String(data.get("video") ?? ""),
        } });
        say(`Prices of ${model.id} saved.`);
        refresh();
      }));
  };
  return h("div", {},
    section("Project", h("p", {}, "Pausing the project refuses every new job and text call with 503 until it is resumed."),
      h("div", { class: "actions" }, projectButton("Pause the project", true), projectButton("Resume the project", false))),
    section("Models and prices", table(["Model", "Prices", "Status", ""], models.map((model) => [
      h("code", {}, model.id),
      h("ul", { class: "plain" }, ...priceLines(model.price).map((line) => h("li", {}, line))),
      model.paused ? h("span", { class: "badge warn" }, "paused") : "available",
      h("div", { class: "actions" }, toggle(model.id, model.paused, (paused) => admin.setModelPaused({ model: model.id, paused }).then(() => undefined)), priceForm(model)),
    ]), "Models")),
    section("Upstream routes", routes.length === 0
      ? h("p", {}, "No upstream routes: this process uses the simulated provider.")
      : table(["Route", "Models", "Health", "Requests", "Failures", "Last error", ""], routes.map((route) => [
        h("code", {}, route.name), route.models.join(", "), route.healthy ? "healthy" : h("span", { class: "badge warn" }, "unhealthy"),
        String(route.requests), `${route.failures} (${route.consecutiveFailures} in a row)`, route.lastError || "—",
        toggle(route.name, route.paused, (paused) => admin.setRoutePaused({ name: route.name, paused }).then(() => undefined)),
      ]), "Upstream routes")));
}

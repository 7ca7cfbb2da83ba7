// Running scenario files of the configured directory (scenarios.directory) in the daemon, each
// in a core of its own: progress, the pass/fail list, and the JUnit report to download.
import { download, get, post } from "/console/api.js";
import { announce, fill, h } from "/console/dom.js";
import { onEvent } from "/console/hub.js";

export class ScenariosView {
  constructor() {
    this.body = h("div", {}, "Loading…");
    this.run = h("div", { "aria-live": "polite" });
    this.element = h("section", { "aria-labelledby": "sc-heading" }, h("h2", { id: "sc-heading" }, "Scenarios"), this.body, this.run);
  }

  async open() {
    const list = await get("/v1/scenarios");
    if (!list.directory) {
      fill(this.body, h("p", { class: "card" }, "No scenarios directory is configured. Set ", h("code", {}, "scenarios.directory"),
        " in the daemon's configuration (the package ships the library in ", h("code", {}, "/usr/share/cardbench/scenarios"), ")."));
      return;
    }
    const select = h("select", { id: "sc-path" },
      h("optgroup", { label: "Folders" }, list.folders.map((f) => h("option", { value: f.path }, `${f.path === "." ? "all" : f.path + "/"} (${f.count})`))),
      h("optgroup", { label: "Files" }, list.files.map((f) => h("option", { value: f }, f))));
    fill(this.body, h("form", { class: "card", onsubmit: (e) => { e.preventDefault(); this.start(select.value); } },
      h("p", { class: "muted" }, "From ", h("code", {}, list.directory), ". Each scenario runs on a daemon core of its own, apart from this daemon's terminals and ledger."),
      h("div", { class: "field" }, h("label", { for: "sc-path" }, "File or folder"), select),
      h("button", { type: "submit", class: "primary" }, "Run")));
    this.off = onEvent((e) => { if (e.type.startsWith("scenario-") && e.data?.id === this.id) this.refresh(); });
    const runs = await get("/v1/scenario-runs");
    if (runs.length) { this.id = runs[0].id; this.show(runs[0]); }
  }

  close() { this.off?.(); clearTimeout(this.timer); }

  async start(path) {
    try {
      const run = await post("/v1/scenario-runs", { path });
      this.id = run.id;
      this.show(run);
      this.poll();
    } catch (e) { announce(e.message, "error"); }
  }

  async poll() {
    await this.refresh();
    if (this.state === "running") this.timer = setTimeout(() => this.poll(), 1000);
  }

  async refresh() {
    if (!this.id) return;
    try { this.show(await get(`/v1/scenario-runs/${this.id}`)); } catch (e) { announce(e.message, "error"); }
  }

  show(run) {
    this.state = run.state;
    const done = run.passed + run.failed;
    fill(this.run, h("section", { class: "card", "aria-labelledby": "run-heading" },
      h("h3", { id: "run-heading" }, `Run ${run.id}: ${run.path} — `, h("span", { class: `badge badge-${run.state}` }, run.state)),
      h("p", { class: "counts" }, `${done} of ${run.total} run: ${run.passed} passed, ${run.failed} failed`),
      h("progress", { max: run.total, value: done, "aria-label": "Scenarios run" }),
      run.state !== "running" ? h("p", {}, h("button", { type: "button", onclick: () =>
        download(`/v1/scenario-runs/${run.id}/junit`, `scenarios-${run.id}.xml`).catch((e) => announce(e.message, "error")) }, "Download the JUnit report")) : null,
      h("ol", { class: "results" }, run.results.map((r) => h("li", { class: r.passed ? "pass" : "fail" },
        h("span", { class: "mark", "aria-hidden": "true" }, r.passed ? "✓" : "✗"), " ",
        h("span", { class: "visually-hidden" }, r.passed ? "passed: " : "failed: "),
        h("strong", {}, r.name), " ", h("span", { class: "muted" }, `${r.file}, ${r.seconds.toFixed(2)} s`),
        r.failure ? h("pre", { class: "failure" }, r.failure) : null)))));
  }
}

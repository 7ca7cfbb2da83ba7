// Opening a Viva or Billpocket URL as the merchant's app would: pasted, or built from a form of
// the document's fields. The request is answered later (`wait: false`), so the terminal's
// panel beside it takes the card and the PIN meanwhile.
import { get, post } from "/console/api.js";
import { announce, badge, fill, h } from "/console/dom.js";
import { TerminalPanel } from "/console/terminals.js";
import { callbackFields, fieldsTable } from "/console/transactions.js";

// The fields each front documents (docs/viva.md, docs/billpocket.md), with values that work on
// the bench; an empty field is not sent.
const forms = {
  viva: {
    label: "Viva Wallet (vivapayclient://pay/v1)",
    build: (f) => "vivapayclient://pay/v1?" + query(f),
    fields: [
      ["callback", "mycallbackscheme://result"], ["merchantKey", "SG23323424EXS3"], ["appId", "com.example.myapp"],
      ["action", "sale", ["sale", "pre_auth", "capture_pre_auth", "cancel", "abort", "batch", "transactionDetails"]],
      ["amount", "1200", null, "cents"], ["tipAmount", "", null, "cents, part of the amount"],
      ["withInstallments", "", ["", "false", "true"]], ["preferredInstallments", ""],
      ["clientTransactionId", () => `console-${Date.now()}`], ["referenceNumber", "", null, "cancel, capture: the sale's STAN"],
      ["orderCode", ""], ["command", "", ["", "open", "close"], "batch"],
    ],
  },
  billpocket: {
    label: "Billpocket (billpocket://)",
    build: (f) => "billpocket://" + query(f),
    fields: [
      ["transaction", "venta", ["venta", "devolucion"]], ["userToken", "", null, "cardbench billpocket user create"],
      ["devicetoken", "", null, "8–12 characters"], ["amount", "100.00", null, "pesos, at most 2 decimals"], ["tip", ""],
      ["msi", "", ["", "0", "3", "6", "9", "12"]], ["reference", () => `console-${Date.now()}`],
      ["identifier", () => `console-${Date.now()}`], ["urlScheme", "billpocketcallback", null, "app scheme or http(s) URL"],
      ["transactionId", "", null, "devolucion"], ["email", ""], ["phone", ""],
    ],
  },
};

function query(fields) {
  return fields.filter(([, v]) => v !== "").map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
}

// The last request survives moving between views.
let last = null;

export class OpenView {
  constructor() {
    this.url = h("textarea", { id: "open-url", rows: 3, spellcheck: "false", required: true, placeholder: "vivapayclient://pay/v1?…" });
    this.terminal = h("select", { id: "open-terminal" });
    this.result = h("div", { "aria-live": "polite" });
    this.panelSlot = h("div", { class: "open-terminal" });
    this.front = h("select", { id: "open-front", onchange: () => this.drawBuilder() },
      Object.entries(forms).map(([k, v]) => h("option", { value: k }, v.label)));
    this.builder = h("div", { class: "builder-fields" });
    const builder = h("details", { class: "builder" }, h("summary", {}, "Build a URL from the document's fields"),
      h("div", { class: "field" }, h("label", { for: "open-front" }, "App"), this.front), this.builder,
      h("button", { type: "button", onclick: () => this.build() }, "Put the URL above"));
    const form = h("form", { class: "card", onsubmit: (e) => { e.preventDefault(); this.send(); } },
      h("div", { class: "field" }, h("label", { for: "open-url" }, "URL the merchant's app sends"), this.url),
      h("div", { class: "field" }, h("label", { for: "open-terminal" }, "Terminal"), this.terminal),
      builder,
      h("button", { type: "submit", class: "primary" }, "Open"));
    this.element = h("section", { "aria-labelledby": "open-heading" }, h("h2", { id: "open-heading" }, "Open a URL"),
      h("div", { class: "open-layout" }, h("div", {}, form, this.result), this.panelSlot));
    this.drawBuilder();
  }

  async send() {
    const url = this.url.value.trim();
    if (!url) return announce("Paste or build a URL first", "error");
    const body = { url, wait: false };
    if (this.terminal.value) body.terminal = this.terminal.value;
    try {
      const pending = await post("/v1/open", body);
      last = { url, status: "pending", id: pending.id };
      this.showResult();
      const result = await get(`/v1/requests/${pending.id}`);
      last = { url, status: "done", result };
    } catch (e) {
      last = { url, status: "error", error: e };
    }
    this.showResult();
  }

  async open() {
    const [terminals, cards] = await Promise.all([get("/v1/terminals"), get("/v1/cards")]);
    for (const t of terminals) this.terminal.append(h("option", { value: t.name }, t.name));
    const draw = () => {
      this.panel?.close();
      const t = terminals.find((x) => x.name === this.terminal.value) ?? terminals[0];
      this.panel = t ? new TerminalPanel(t, cards) : null;
      fill(this.panelSlot, this.panel?.element ?? "");
    };
    this.terminal.addEventListener("change", draw);
    draw();
    if (last) { this.url.value = last.url; this.showResult(); }
  }

  close() { this.panel?.close(); }

  drawBuilder() {
    const form = forms[this.front.value];
    fill(this.builder, form.fields.map(([name, value, choices, hint]) => {
      const id = `b-${name}`;
      const initial = typeof value === "function" ? value() : value;
      const input = choices
        ? h("select", { id, "data-name": name }, choices.map((c) => h("option", { value: c, selected: c === initial }, c === "" ? "(not sent)" : c)))
        : h("input", { id, "data-name": name, value: initial, autocomplete: "off", spellcheck: "false" });
      return h("div", { class: "field" }, h("label", { for: id }, name, hint ? h("span", { class: "muted" }, ` (${hint})`) : null), input);
    }));
  }

  build() {
    const form = forms[this.front.value];
    const fields = [...this.builder.querySelectorAll("[data-name]")].map((e) => [e.dataset.name, e.value.trim()]);
    this.url.value = form.build(fields);
    this.url.focus();
  }

  showResult() {
    if (!last) return fill(this.result);
    if (last.status === "pending") {
      return fill(this.result, h("p", { class: "card pending", role: "status" },
        "Waiting for the terminal: present a card and answer its prompts on the keypad."));
    }
    if (last.status === "error") {
      const e = last.error;
      return fill(this.result, h("div", { class: "card error", role: "alert" }, h("h3", {}, "Refused"),
        e.field ? h("p", {}, "Field ", h("code", {}, e.field), ": ", e.rule) : h("p", {}, e.message)));
    }
    const r = last.result;
    fill(this.result, h("section", { class: "card" }, h("h3", {}, badge(r.status), " ", r.message),
      r.callback ? [h("p", {}, "Callback"), h("p", { class: "url" }, h("code", {}, r.callback)),
        fieldsTable(r.fields.length ? r.fields.map((f) => [f.name, f.value]) : callbackFields(r.callback), "The callback's fields")]
        : h("p", {}, "No callback."),
      r.transaction ? h("p", {}, h("a", { href: `#/transactions/${r.transaction.id}` }, `Transaction ${r.transaction.id}: trace and cryptograms`)) : null));
  }
}


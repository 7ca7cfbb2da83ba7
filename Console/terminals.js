// A terminal drawn as a payment terminal: its screen (amount, prompt, what is typed, status,
// last outcome), its keypad posting to the keypad API, and its card slot (insert, tap, swipe,
// remove, the card's counters). Live from the event stream.
import { del, get, post } from "/console/api.js";
import { announce, fill, h, money } from "/console/dom.js";
import { onEvent } from "/console/hub.js";

export class TerminalsView {
  constructor() {
    this.grid = h("div", { class: "terminals" });
    this.element = h("section", { "aria-labelledby": "terminals-heading" },
      h("h2", { id: "terminals-heading" }, "Terminals"), this.grid);
  }

  async open() {
    const [terminals, cards] = await Promise.all([get("/v1/terminals"), get("/v1/cards")]);
    this.panels = terminals.map((t) => new TerminalPanel(t, cards));
    fill(this.grid, this.panels.map((p) => p.element));
    if (terminals.length === 0) fill(this.grid, h("p", {}, "This daemon has no terminals."));
  }

  close() { for (const p of this.panels ?? []) p.close(); }
}

const removalPoints = ["", "SELECT", "GET PROCESSING OPTIONS", "READ RECORD", "VERIFY", "GENERATE AC", "GENERATE AC#2"];

/** One terminal's panel; `cards` are the profiles of `GET /v1/cards`. */
export class TerminalPanel {
  constructor(terminal, cards) {
    this.name = terminal.name;
    this.cards = cards;
    this.entry = "";
    this.prompt = terminal.prompt ? { name: terminal.prompt, kind: terminal.promptKind, options: terminal.promptOptions } : null;
    const id = `t-${terminal.name.replace(/[^A-Za-z0-9_-]/g, "_")}`;

    this.amountLine = h("p", { class: "amount" });
    this.promptLine = h("p", { class: "prompt" });
    this.entryLine = h("p", { class: "entry", "aria-label": "Typed on the keypad" });
    this.statusLine = h("p", { class: "statusline", role: "status", "aria-live": "polite" });
    this.outcomeLine = h("p", { class: "outcome" });
    const screen = h("div", { class: "screen", role: "group", "aria-label": `Screen of ${terminal.name}` },
      this.amountLine, this.promptLine, this.entryLine, this.statusLine, this.outcomeLine);

    const key = (label, action, cls = "", aria = label) =>
      h("button", { type: "button", class: `key ${cls}`, "aria-label": aria, onclick: action }, label);
    const digits = ["1", "2", "3", "4", "5", "6", "7", "8", "9"].map((d) => key(d, () => this.digit(d)));
    this.keypad = h("div", { class: "keypad", role: "group", "aria-label": `Keypad of ${terminal.name}` },
      digits, key("Cancel", () => this.cancel(), "cancel", "Cancel"), key("0", () => this.digit("0")),
      key("Clear", () => this.clear(), "clear", "Clear"), key("OK", () => this.ok(), "ok", "OK"));

    this.slot = this.cardSlot(id);
    this.element = h("article", { class: "terminal card", "aria-labelledby": `${id}-name`, "data-terminal": terminal.name,
      onkeydown: (e) => this.key(e) },
      h("header", {}, h("h3", { id: `${id}-name` }, terminal.name),
        h("span", { class: "muted" }, `TID ${terminal.tid} · ${terminal.reader}`)),
      h("div", { class: "device" }, screen, this.keypad), this.slot);

    this.status(terminal.activity ?? (terminal.cardPresent ? "Card in the reader" : "Idle"));
    this.render();
    this.off = onEvent((e) => { if (e.terminal === this.name) this.event(e); });
    this.refreshSlot();
    if (!terminal.activity) this.showLast();
  }

  /** The terminal's last transaction, as its screen would still show it. */
  async showLast() {
    try {
      const [t] = await get(`/v1/transactions?terminal=${encodeURIComponent(this.name)}&limit=1`);
      if (!t || this.amountLine.textContent) return;
      this.amountLine.textContent = `${t.action.replace("_", " ").toUpperCase()} ${money(t.amount, t.currency)}`;
      this.outcomeLine.textContent = `${t.status.toUpperCase()}${t.responseCode ? " " + t.responseCode : ""}${t.message ? " — " + t.message : ""}`;
      this.outcomeLine.className = `outcome outcome-${t.status}`;
    } catch { /* the list is only a courtesy here */ }
  }

  close() { this.off?.(); }

  cardSlot(id) {
    const groups = [["embedded", "Embedded profiles"], ["configured", "Configured profiles (host.cards)"]];
    this.profile = h("select", { id: `${id}-profile` },
      groups.map(([source, label]) => {
        const cards = this.cards.filter((c) => c.source === source);
        return cards.length === 0 ? null : h("optgroup", { label },
          cards.map((c) => h("option", { value: c.name }, `${c.name} — ${c.label} ${c.maskedPAN.slice(-4)}`)));
      }));
    this.profile.value = this.cards.some((c) => c.name === "visa-credit-cvn10") ? "visa-credit-cvn10" : this.cards[0]?.name ?? "";
    this.removeAfter = h("select", { id: `${id}-remove` },
      removalPoints.map((p) => h("option", { value: p }, p === "" ? "never: it stays in" : `right after ${p}`)));
    this.slotState = h("p", { class: "slotstate", role: "status", "aria-live": "polite" }, "…");
    const button = (label, action) => h("button", { type: "button", onclick: action }, label);
    this.insertButtons = ["insert", "tap", "swipe"].map((verb) => {
      const b = button(verb[0].toUpperCase() + verb.slice(1), () => this.present(verb));
      b.dataset.verb = verb;
      return b;
    });
    this.profile.addEventListener("change", () => this.enableInterfaces());
    this.enableInterfaces();
    return h("fieldset", { class: "slot" }, h("legend", {}, "Card slot"),
      h("div", { class: "row" },
        h("label", { for: `${id}-profile` }, "Card"), this.profile),
      h("div", { class: "row" }, h("label", { for: `${id}-remove` }, "Pull"), this.removeAfter),
      h("div", { class: "buttons" }, this.insertButtons, button("Remove", () => this.removeCard())),
      this.slotState);
  }

  enableInterfaces() {
    const card = this.cards.find((c) => c.name === this.profile.value);
    for (const b of this.insertButtons) b.disabled = card ? !card.interfaces.includes(b.dataset.verb) : true;
  }

  async present(verb) {
    const body = { profile: this.profile.value, interface: verb };
    if (this.removeAfter.value) body.removeAfter = this.removeAfter.value;
    try {
      await post(`/v1/terminals/${encodeURIComponent(this.name)}/card`, body);
      announce(`${this.name}: ${this.profile.value} presented (${verb})`);
    } catch (e) { announce(`${this.name}: ${e.message}`, "error"); }
    this.refreshSlot();
  }

  async removeCard() {
    try {
      const r = await del(`/v1/terminals/${encodeURIComponent(this.name)}/card`);
      announce(r.result === "removed" ? `${this.name}: card removed` : `${this.name}: no card to remove`);
    } catch (e) { announce(`${this.name}: ${e.message}`, "error"); }
    this.refreshSlot();
  }

  async refreshSlot() {
    try {
      const s = await get(`/v1/terminals/${encodeURIComponent(this.name)}/card`);
      const parts = [];
      parts.push(s.present ? (s.interface ? `${s.profile} (${s.interface === "insert" ? "inserted" : s.interface === "tap" ? "in the field" : "swiped"})`
        : s.card === "socket" ? "a card on the reader's socket" : s.card === "reader" ? "a card in the reader" : "a card") : "No card");
      if (s.profile && s.atc) {
        const atc = Object.entries(s.atc).map(([aid, n]) => `${aid}: ${n}`).join(", ");
        parts.push(`${s.present && s.interface ? "" : "last card " + s.profile + " — "}ATC ${atc}`);
        parts.push(`PIN tries ${s.pinTriesRemaining}`);
      }
      if (s.account) parts.push(`balance ${money(s.account.balance, s.account.currency)}${s.account.blocked ? " (blocked)" : ""}`);
      this.slotState.textContent = parts.filter(Boolean).join(" · ");
    } catch (e) { this.slotState.textContent = e.message; }
  }

  // MARK: the keypad

  digit(d) {
    if (this.entry.length >= 12) return;
    this.entry += d;
    this.render();
  }

  clear() { this.entry = ""; this.render(); }

  async cancel() {
    this.entry = "";
    this.render();
    await this.send({ cancel: true });
  }

  async ok() {
    const p = this.prompt;
    let body;
    if (p?.kind === "select") {
      if (!this.entry) return announce(`${this.name}: type the option's number, then OK`, "error");
      body = { select: Number(this.entry) };
    } else if (p?.kind === "confirm" || p?.kind === "photo") {
      body = { confirm: true };
    } else if (this.entry) {
      body = { pin: this.entry };
    } else {
      return announce(p ? `${this.name}: type the PIN, then OK` : `${this.name}: nothing to answer`, "error");
    }
    const sent = await this.send(body);
    if (sent) { this.entry = ""; this.render(); }
  }

  async send(body) {
    try {
      const r = await post(`/v1/terminals/${encodeURIComponent(this.name)}/keypad`, body);
      if (r.result === "queued") announce(`${this.name}: no prompt is up; the input waits for the next one`);
      return true;
    } catch (e) {
      announce(`${this.name}: ${e.message}`, "error");
      return false;
    }
  }

  /** Digits, Enter, Backspace and Escape work as the keys when focus is on the panel's keypad or screen. */
  key(e) {
    if (e.target.closest?.("select, input, textarea, .slot")) return;
    if (/^[0-9]$/.test(e.key)) { this.digit(e.key); e.preventDefault(); }
    else if (e.key === "Backspace") { this.clear(); e.preventDefault(); }
    else if (e.key === "Escape") { this.cancel(); e.preventDefault(); }
    else if (e.key === "Enter" && !e.target.closest?.("button")) { this.ok(); e.preventDefault(); }
  }

  // MARK: the screen

  status(text) { this.statusLine.textContent = text; }

  render() {
    const p = this.prompt;
    if (!p) this.promptLine.textContent = "";
    else if (p.kind === "pin") this.promptLine.textContent = `Enter ${p.name}${p.triesLeft ? ` (${p.triesLeft} tries left)` : ""}`;
    else if (p.kind === "select") {
      fill(this.promptLine, p.name, p.options?.length ? h("ol", { class: "options" }, p.options.map((o) => h("li", {}, o))) : null);
    } else this.promptLine.textContent = `${p.name}? OK to confirm, Cancel to refuse`;
    const secret = !p || p.kind === "pin";
    this.entryLine.textContent = this.entry ? (secret ? "•".repeat(this.entry.length) : this.entry) : "";
    this.element?.classList.toggle("prompting", !!p);
  }

  event(e) {
    const d = e.data ?? {};
    switch (e.type) {
      case "transaction-started":
        this.busy = true;
        this.amountLine.textContent = d.amount ? `${d.action.replace("_", " ").toUpperCase()} ${money(d.amount, d.currency)}` : d.action;
        this.outcomeLine.textContent = "";
        this.outcomeLine.className = "outcome";
        this.status("Processing…");
        break;
      case "waiting-for-card": this.status("Insert, tap or swipe a card"); break;
      case "card-inserted": this.status(this.busy ? "Card read…" : "Card in the reader"); this.refreshSlot(); break;
      case "card-removed": this.status("Card removed"); this.refreshSlot(); break;
      case "prompt":
        this.prompt = { name: d.prompt, kind: d.kind, options: d.options ? d.options.split("\n") : null, triesLeft: d.triesLeft };
        this.entry = "";
        this.status(d.kind === "pin" ? "Waiting for the PIN" : "Waiting for the cardholder");
        this.render();
        this.keypad.querySelector(".ok")?.focus({ preventScroll: true });
        break;
      case "prompt-answered":
        this.prompt = null;
        this.entry = "";
        this.status("Processing…");
        this.render();
        break;
      case "outcome":
        this.busy = false;
        this.prompt = null;
        this.entry = "";
        this.render();
        // A card transaction's outcome has its code and message; a cancel, capture or refund, its action.
        this.outcomeLine.textContent = d.responseCode || d.message
          ? `${String(d.status).toUpperCase()}${d.responseCode ? " " + d.responseCode : ""}${d.message ? " — " + d.message : ""}`
          : `${String(d.action ?? "").replace("_", " ").toUpperCase()} ${String(d.status).toUpperCase()}`;
        this.outcomeLine.className = `outcome outcome-${d.status}`;
        this.status(d.status === "approved" ? "Approved" : "Done");
        this.refreshSlot();
        break;
    }
  }
}

// The emulated issuer: the amount tables in force, each terminal's queue of one-shot answers
// (a response code, "unavailable", a delay), and the card accounts' balances.
import { del, get, post } from "/console/api.js";
import { announce, fill, h, money } from "/console/dom.js";

export class HostView {
  constructor() {
    this.body = h("div", {}, "Loading…");
    this.element = h("section", { "aria-labelledby": "host-heading" }, h("h2", { id: "host-heading" }, "Host"), this.body);
  }

  async open() {
    const [host, cards] = await Promise.all([get("/v1/host"), get("/v1/cards")]);
    const tables = h("section", { class: "card" }, h("h3", {}, "Amount tables in force"),
      h("p", { class: "muted" }, "Scripted declines by amount, per front (docs/daemon.md: viva.amount_table, …)."),
      h("table", { class: "fields" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Front"), h("th", { scope: "col" }, "Table"))),
        h("tbody", {}, Object.entries(host.amountTables).sort().map(([front, table]) => h("tr", {}, h("th", { scope: "row" }, front), h("td", {}, table))))));
    const queues = Object.entries(host.queues).sort().map(([terminal, queue]) => this.queue(terminal, queue));
    const accounts = h("section", { class: "card" }, h("h3", {}, "Card accounts"),
      h("div", { class: "scroll" }, h("table", { class: "list" },
        h("thead", {}, h("tr", {}, ["Profile", "Card", "Balance", "State", "Online PIN tries", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, cards.map((c) => h("tr", {}, h("td", {}, c.name), h("td", {}, `${c.brand ?? ""} ${c.maskedPAN}`),
          h("td", { class: "num" }, c.account ? money(c.account.balance, c.account.currency) : ""),
          h("td", {}, c.account ? [c.account.blocked && "blocked", c.account.lost && "lost", c.account.stolen && "stolen"].filter(Boolean).join(", ") || "active" : ""),
          h("td", {}, c.account?.onlinePINTriesRemaining ?? ""),
          h("td", {}, h("button", { type: "button", "aria-label": `Reset the account of ${c.name}`, onclick: () => this.reset(c.name) }, "Reset"))))))));
    fill(this.body, tables, queues, accounts);
  }

  queue(terminal, queue) {
    const id = `q-${terminal.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    const code = h("input", { id: `${id}-code`, size: 3, maxlength: 2, placeholder: "51", autocomplete: "off", pattern: "[A-Za-z0-9]{2}" });
    const delay = h("input", { id: `${id}-delay`, type: "number", min: 1, max: 600000, step: 1, placeholder: "1500" });
    const send = async (body) => {
      try {
        await post(`/v1/terminals/${encodeURIComponent(terminal)}/host-queue`, body);
        announce(`${terminal}: queued`);
        await this.open();
      } catch (e) { announce(`${terminal}: ${e.message}`, "error"); }
    };
    return h("section", { class: "card" }, h("h3", {}, `Queue of ${terminal}`),
      h("p", { class: "muted" }, "The next authorisations on this terminal get these, first first; then the rules decide."),
      queue.length ? h("ol", {}, queue.map((q) => h("li", {}, q.code ? `answer ${q.code}` : q.unavailable ? "issuer unavailable" : `delay ${q.delayMs} ms`)))
        : h("p", {}, "Nothing queued."),
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); send({ code: code.value.trim() }); } },
        h("label", { for: `${id}-code` }, "Response code"), code, h("button", { type: "submit" }, "Queue answer")),
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); send({ delayMs: Number(delay.value) }); } },
        h("label", { for: `${id}-delay` }, "Delay (ms)"), delay, h("button", { type: "submit" }, "Queue delay")),
      h("div", { class: "buttons" },
        h("button", { type: "button", onclick: () => send({ unavailable: true }) }, "Queue issuer unavailable"),
        h("button", { type: "button", onclick: async () => {
          try { await del(`/v1/terminals/${encodeURIComponent(terminal)}/host-queue`); await this.open(); announce(`${terminal}: queue cleared`); }
          catch (e) { announce(e.message, "error"); }
        } }, "Clear queue")));
  }

  async reset(profile) {
    try {
      await post("/v1/host/accounts", { profile });
      announce(`${profile}: account reset to its profile's balance and state`);
      await this.open();
    } catch (e) { announce(e.message, "error"); }
  }
}

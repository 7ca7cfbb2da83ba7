// The ledger: a filtered list, and one transaction with its callback, deliveries, cryptograms,
// bit strings explained and the APDU trace decoded (all PAN-masked, as the ledger keeps them).
import { get, post, save } from "/console/api.js";
import { announce, badge, fill, h, money, when } from "/console/dom.js";
import { onEvent } from "/console/hub.js";

const providers = ["", "viva", "billpocket", "worldline", "citcon", "iso8583", "cli"];
const statuses = ["", "approved", "declined", "failed", "cancelled", "refunded", "reversed", "in_progress"];

export class TransactionsView {
  constructor() {
    const select = (id, label, values) => [h("label", { for: id }, label),
      h("select", { id, name: id }, values.map((v) => h("option", { value: v }, v === "" ? "any" : v.replace("_", " "))))];
    this.form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); this.load(); } },
      h("div", { class: "field" }, select("f-terminal", "Terminal", [""])),
      h("div", { class: "field" }, select("f-provider", "Front", providers)),
      h("div", { class: "field" }, select("f-status", "Status", statuses)),
      h("div", { class: "field" }, h("label", { for: "f-from" }, "From"), h("input", { id: "f-from", type: "date" })),
      h("div", { class: "field" }, h("label", { for: "f-to" }, "To"), h("input", { id: "f-to", type: "date" })),
      h("button", { type: "submit", class: "primary" }, "Filter"));
    this.table = h("div", { class: "scroll" });
    this.element = h("section", { "aria-labelledby": "tx-heading" }, h("h2", { id: "tx-heading" }, "Transactions"), this.form, this.table);
  }

  async open() {
    const terminals = await get("/v1/terminals");
    const select = this.form.querySelector("#f-terminal");
    for (const t of terminals) select.append(h("option", { value: t.name }, t.name));
    await this.load();
    this.off = onEvent((e) => { if (e.type === "outcome") { clearTimeout(this.timer); this.timer = setTimeout(() => this.load(), 300); } });
  }

  close() { this.off?.(); clearTimeout(this.timer); }

  async load() {
    const q = new URLSearchParams({ limit: "100" });
    for (const [id, key] of [["f-terminal", "terminal"], ["f-provider", "provider"], ["f-status", "status"], ["f-from", "from"], ["f-to", "to"]]) {
      const v = this.form.querySelector(`#${id}`).value;
      if (v) q.set(key, v);
    }
    try {
      const rows = await get(`/v1/transactions?${q}`);
      fill(this.table, rows.length === 0 ? h("p", {}, "No transactions match.") : h("table", { class: "list" },
        h("caption", { class: "visually-hidden" }, "Transactions, newest first"),
        h("thead", {}, h("tr", {}, ["#", "When", "Terminal", "Front", "Action", "Amount", "Status", "Code", "Card", "STAN"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows.map((t) => h("tr", {},
          h("td", {}, h("a", { href: `#/transactions/${t.id}` }, String(t.id))),
          h("td", {}, when(t.createdAt)), h("td", {}, t.terminal), h("td", {}, t.provider), h("td", {}, t.action.replace("_", " ")),
          h("td", { class: "num" }, money(t.amount, t.currency)), h("td", {}, badge(t.status)), h("td", {}, t.responseCode ?? ""),
          h("td", {}, t.maskedPAN ? `${t.brand ?? ""} ${t.maskedPAN}` : ""), h("td", {}, t.stan))))));
    } catch (e) { announce(e.message, "error"); }
  }
}

/** The fields of a callback URL, in order, decoded. */
export function callbackFields(url) {
  const query = url.includes("?") ? url.slice(url.indexOf("?") + 1) : url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  return query.split("&").filter(Boolean).map((pair) => {
    const i = pair.indexOf("=");
    const decode = (s) => { try { return decodeURIComponent(s.replace(/\+/g, "%20")); } catch { return s; } };
    return i < 0 ? [decode(pair), ""] : [decode(pair.slice(0, i)), decode(pair.slice(i + 1))];
  });
}

export function fieldsTable(fields, caption) {
  return h("table", { class: "fields" }, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, "Value"))),
    h("tbody", {}, fields.map(([name, value]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, h("code", {}, value))))));
}

function dl(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function tlvTree(nodes) {
  return h("ul", { class: "tlv" }, nodes.map((n) => h("li", {},
    h("code", { class: "tag" }, n.tag), " ", h("span", { class: "tagname" }, n.name ?? "(unknown tag)"), ` [${n.length}]`,
    n.value !== undefined ? [": ", h("code", { class: "value" }, n.value)] : null,
    n.text ? [" ", h("span", { class: "text" }, `"${n.text}"`)] : null,
    n.children ? tlvTree(n.children) : null)));
}

function notificationSection(n, resend) {
  const title = n.kind === "webhook" ? `Webhook ${n.event ?? ""}` : "Callback";
  const status = h("p", { class: "muted", role: "status" });
  const button = h("button", { type: "button", class: "resend", "aria-label": `Send notification ${n.id} again`,
    onclick: async () => {
      button.disabled = true;
      try {
        const r = await resend(n.id);
        announce(`Notification ${n.id} sent again: ${r.attempt.outcome}, ${r.attempt.answer}`);
      } catch (e) {
        status.textContent = e.message;
        button.disabled = false;
      }
    } }, "Send again");
  return h("section", { class: "card notification", "data-notification": String(n.id) }, h("h3", {}, `${title} #${n.id}`),
    h("p", { class: "url" }, h("code", {}, n.payload)),
    n.kind === "callback" ? fieldsTable(callbackFields(n.payload), "The callback's fields") : null,
    dl([["Delivery", `${n.kind} to ${n.target}`], ["Status", badge(n.status)], ["Event id", n.eventId ? h("code", {}, n.eventId) : ""],
      ["Transaction", n.transactionId !== undefined ? h("a", { href: `#/transactions/${n.transactionId}` }, `#${n.transactionId}`) : ""],
      ["Created", n.createdAt], ["Delivered", n.deliveredAt], ["Last error", n.lastError]]),
    n.history.length
      ? h("ol", { class: "attempts" }, n.history.map((a) => h("li", {}, `${a.at} `, badge(a.outcome), a.resend ? " (resend) " : " ", a.answer)))
      : h("p", { class: "muted" }, n.status === "delivered" ? "No attempt: it went in the app's reply." : "Not tried yet."),
    h("div", { class: "buttons" }, button), status);
}

export class TransactionView {
  constructor(id) {
    this.id = id;
    this.body = h("div", {}, h("p", {}, "Loading…"));
    this.element = h("section", { "aria-labelledby": "txd-heading" },
      h("p", {}, h("a", { href: "#/transactions" }, "← All transactions")),
      h("h2", { id: "txd-heading" }, `Transaction ${id}`), this.body);
  }

  async open() {
    const t = await get(`/v1/transactions/${encodeURIComponent(this.id)}?decode=true`);
    const d = t.decoded;
    const sections = [];
    sections.push(h("section", { class: "card" }, h("h3", {}, badge(t.status), " ", `${t.provider} ${t.action.replace("_", " ")} of ${money(t.amount, t.currency)}`),
      t.message ? h("p", {}, t.message) : null,
      dl([["Terminal", `${t.terminal} (TID ${t.tid})`], ["Tip", t.tipAmount ? money(t.tipAmount, t.currency) : ""],
        ["Response code", t.responseCode], ["Authorisation code", t.authorisationCode], ["STAN", t.stan], ["RRN", t.rrn],
        ["Card", t.maskedPAN ? `${t.brand ?? ""} ${t.maskedPAN} ${t.cardholderName ?? ""}` : ""],
        ["Application", t.aid ? `${t.aid} ${t.applicationLabel ?? ""}` : ""], ["Entry", t.entry ? [t.entry.interface, " (POS entry mode ", t.entry.posEntryMode, ")", t.entry.kernel ? `, kernel ${t.entry.kernel}` : "", t.entry.outcome ? `: ${t.entry.outcome}` : ""].join("") : ""],
        ["Entry path", t.entry?.path?.join(" → ")], ["CVM", t.cvm], ["Installments", t.installments],
        ["Client reference", t.clientReference], ["Original", t.originalId ? h("a", { href: `#/transactions/${t.originalId}` }, `#${t.originalId}`) : ""],
        ["Started", when(t.createdAt)], ["Completed", when(t.completedAt)], ["transactionId", h("code", {}, t.transactionId)]])));
    // Every notification of the transaction and of the operations on it, each with its
    // attempts and a button that sends it again now (docs/daemon.md, "Notifications").
    const notifications = await get(`/v1/notifications?transaction=${encodeURIComponent(t.id)}`);
    for (const n of notifications) sections.push(this.notification(n));
    // The transaction as a scenario that replays it (docs/recording.md).
    if (t.action === "sale" || t.action === "pre_auth") sections.push(this.recording(t));
    // A Citcon charge's chargebacks, played as the cardholder's bank (docs/citcon.md, "Chargebacks").
    if (t.provider === "citcon" && (t.action === "sale" || t.action === "pre_auth")) {
      try { sections.push(this.chargebacks(await get(`/v1/citcon/charges?transaction=${encodeURIComponent(t.id)}`))); } catch { /* no charge for this row */ }
    }
    if (d?.cryptograms) {
      const c = d.cryptograms;
      sections.push(h("section", { class: "card" }, h("h3", {}, "Cryptograms"),
        dl([["ARQC", c.firstCryptogram ? h("code", {}, c.firstCryptogram) : ""], ["CID", c.firstCID], ["ATC", c.atc], ["CVN", c.cvn],
          ["IAD (9F10)", c.issuerApplicationData ? h("code", {}, c.issuerApplicationData) : ""],
          ["ARPC", c.arpc ? h("code", {}, c.arpc) : ""], ["Issuer authentication data (91)", c.issuerAuthenticationData ? h("code", {}, c.issuerAuthenticationData) : ""],
          ["ARC (8A)", c.authorisationResponseCode], ["Second cryptogram", c.secondCryptogram ? h("code", {}, c.secondCryptogram) : ""],
          ["Second CID", c.secondCID]]),
        h("p", { class: "verdict" }, c.verdict)));
    }
    if (d?.bits?.length) {
      sections.push(h("section", { class: "card" }, h("h3", {}, "Bits explained"),
        d.bits.map((b) => h("div", { class: "bits" }, h("h4", {}, `${b.field} (${b.tag}) `, h("code", {}, b.hex), b.note ? h("span", { class: "muted" }, ` ${b.note}`) : null),
          b.set.length ? h("ul", {}, b.set.map((s) => h("li", {}, s))) : h("p", { class: "muted" }, "no bit set")))));
    }
    if (t.oda && t.oda.method !== "none") {
      sections.push(h("section", { class: "card" }, h("h3", {}, "Offline data authentication"),
        dl(Object.entries(t.oda).map(([k, v]) => [k, String(v)]))));
    }
    if (d?.steps?.length) {
      sections.push(h("section", { class: "card" }, h("h3", {}, `APDU trace (${d.steps.length} commands)`),
        h("ol", { class: "trace" }, d.steps.map((s) => h("li", {},
          h("details", {},
            h("summary", {}, h("strong", {}, s.name), s.detail ? ` — ${s.detail}` : "", " → ",
              h("span", { class: s.status === "9000" ? "ok" : "warn" }, `${s.status} ${s.statusMeaning}`)),
            h("p", {}, "C-APDU ", h("code", { class: "hex" }, s.command)),
            s.commandData ? tlvTree(s.commandData) : null,
            h("p", {}, "R-APDU ", h("code", { class: "hex" }, s.response)),
            s.tlv ? tlvTree(s.tlv) : null))))));
    }
    if (t.hostMessages?.length) {
      // The ISO 8583 messages, field by field as the ledger keeps them (card data masked, PIN blocks withheld).
      sections.push(h("section", { class: "card" }, h("h3", {}, `ISO 8583 messages (${t.hostMessages.length})`),
        h("ol", { class: "trace" }, t.hostMessages.map((m) => h("li", {},
          h("details", {},
            h("summary", {}, h("strong", {}, `${m.direction === "out" ? "sent" : "received"} ${m.mti}`), ` — ${m.meaning}`),
            h("table", { class: "fields" }, h("tbody", {}, m.fields.map((f) => h("tr", {},
              h("td", {}, String(f.field)), h("td", {}, f.name),
              h("td", {}, h("code", {}, f.value),
                f.tlv ? h("ul", {}, f.tlv.map((x) => h("li", {}, h("code", {}, x.tag), ` ${x.name}: `, h("code", {}, x.value)))) : null)))))))))));
    }
    fill(this.body, sections);
  }

  chargebacks(record) {
    const charge = record.charge ?? {};
    const list = charge.chargebacks?.data ?? [];
    const status = h("p", { class: "muted", role: "status" });
    const send = async (body) => {
      try {
        const r = await post(`/v1/citcon/charges/${encodeURIComponent(charge.id)}/chargebacks`, body);
        const old = this.body.querySelector("section.chargebacks");
        if (old) old.replaceWith(this.chargebacks(r));
        announce(`Chargeback ${body.action === "open" ? "opened" : body.action.replace("_", " ")}`);
      } catch (e) { status.textContent = e.message; }
    };
    const amount = h("input", { id: "cb-amount", inputmode: "numeric", placeholder: "all that is left" });
    const reason = h("input", { id: "cb-reason", maxlength: "100" });
    const latest = list[list.length - 1];
    const open = !latest || latest.status === "won" || latest.status === "lost";
    return h("section", { class: "card chargebacks" }, h("h3", {}, "Chargebacks"),
      list.length ? h("ol", {}, list.map((c) => h("li", {}, badge(c.status), ` ${money(c.amount)} ${charge.currency ?? ""} `, c.reference ? `(${c.reference})` : ""))) : h("p", { class: "muted" }, "None."),
      open
        ? h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); send({ action: "open", amount: amount.value ? Number(amount.value) : undefined, reason: reason.value || undefined }); } },
          h("div", { class: "field" }, h("label", { for: "cb-amount" }, "Amount (minor units)"), amount),
          h("div", { class: "field" }, h("label", { for: "cb-reason" }, "The bank's reason"), reason),
          h("button", { type: "submit", class: "primary", id: "cb-open" }, "Open a chargeback"))
        : h("div", { class: "buttons" },
          latest.status === "opened" ? h("button", { type: "button", id: "cb-under_review", onclick: () => send({ action: "under_review" }) }, "Under review") : null,
          h("button", { type: "button", id: "cb-won", onclick: () => send({ action: "won" }) }, "Won"),
          h("button", { type: "button", id: "cb-lost", onclick: () => send({ action: "lost" }) }, "Lost")),
      status);
  }

  /** "Save as scenario": the scenario and its card profiles saved as files, the notes shown. */
  recording(t) {
    const status = h("p", { class: "muted", role: "status", id: "record-status" });
    const shown = h("div", {});
    const button = h("button", { type: "button", id: "record", class: "primary", onclick: async () => {
      status.textContent = "Recording…";
      try {
        const r = await get(`/v1/transactions/${encodeURIComponent(t.id)}/scenario`);
        save(new Blob([r.scenario], { type: "application/yaml" }), r.file);
        for (const c of r.cards) save(new Blob([c.profile], { type: "application/yaml" }), c.file);
        status.textContent = `Saved ${r.file}${r.cards.length ? ` and ${r.cards.map((c) => c.file).join(", ")} (put it in a cards folder beside the scenario)` : ""}.`;
        fill(shown, [r.notes.length ? h("ul", { class: "notes" }, r.notes.map((n) => h("li", {}, n))) : null,
          h("details", {}, h("summary", {}, r.file), h("pre", { class: "scenario" }, r.scenario))]);
        announce(`Saved ${r.file}`);
      } catch (e) { status.textContent = e.message; }
    } }, "Save as scenario");
    return h("section", { class: "card recording" }, h("h3", {}, "Record"),
      h("p", { class: "muted" }, "A scenario that replays this transaction: the same card, keypad answers, host answers and expectations (cardbench scenario record)."),
      button, status, shown);
  }

  notification(n) {
    return notificationSection(n, async (id) => {
      const r = await post(`/v1/notifications/${id}/resend`);
      const old = this.body.querySelector(`[data-notification="${id}"]`);
      if (old) old.replaceWith(this.notification(r.notification));
      return r;
    });
  }
}

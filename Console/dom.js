// Building the page without innerHTML: every value from the daemon goes in as text, so nothing
// it holds (a client reference, a merchant's URL) can become markup or script.

/** An element: h("button", {class: "key", onclick: f, "aria-label": "OK"}, "OK", child…). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `element` holds. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** Minor units as an amount: 1200 → "12.00". */
export function money(minor, currency) {
  if (minor === undefined || minor === null || minor === "") return "";
  const n = Number(minor);
  const sign = n < 0 ? "-" : "";
  const abs = Math.abs(n);
  const text = `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, "0")}`;
  return currency ? `${text} ${currencyName(currency)}` : text;
}

const currencies = { 978: "EUR", 840: "USD", 484: "MXN", 826: "GBP", 124: "CAD", 156: "CNY", 392: "JPY", 36: "AUD" };
function currencyName(code) { return currencies[Number(code)] ?? String(code); }

/** Microseconds since 1970 as a local date and time. */
export function when(micros) {
  if (!micros) return "";
  const d = new Date(Number(micros) / 1000);
  return d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** A status shown as a badge: approved, declined, failed… */
export function badge(status) {
  return h("span", { class: `badge badge-${String(status).replace(/[^a-z_]/g, "")}` }, String(status).replace("_", " "));
}

/** Says something to screen-reader users and shows it in the status bar. */
export function announce(text, kind = "info") {
  const bar = document.getElementById("notice");
  if (!bar) return;
  bar.dataset.kind = kind;
  bar.textContent = text;
}

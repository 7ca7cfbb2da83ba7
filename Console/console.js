// The bench console's entry point (docs/console.md): signs in with the API token, keeps the
// event stream open, and shows one view at a time by the address's fragment (#/terminals,
// #/transactions/12, …), so a view can be bookmarked and the back button works.
import { adoptTokenFromFragment, events, get, setToken, token } from "/console/api.js";
import { announce, fill, h } from "/console/dom.js";
import { TerminalsView } from "/console/terminals.js";
import { TransactionsView, TransactionView } from "/console/transactions.js";
import { ScenariosView } from "/console/scenarios.js";
import { OpenView } from "/console/open.js";
import { HostView } from "/console/host.js";
import { dispatch } from "/console/hub.js";

const main = document.getElementById("main");
let current = null;

const routes = [
  [/^#\/terminals$/, () => new TerminalsView()],
  [/^#\/transactions$/, () => new TransactionsView()],
  [/^#\/transactions\/([^/]+)$/, (m) => new TransactionView(decodeURIComponent(m[1]))],
  [/^#\/scenarios$/, () => new ScenariosView()],
  [/^#\/open$/, () => new OpenView()],
  [/^#\/host$/, () => new HostView()],
];

function show() {
  const hash = location.hash || "#/terminals";
  current?.close?.();
  current = null;
  announce("");
  for (const [pattern, make] of routes) {
    const m = hash.match(pattern);
    if (!m) continue;
    current = make(m);
    for (const link of document.querySelectorAll("nav a")) {
      const here = hash.startsWith(link.getAttribute("href"));
      link.classList.toggle("current", here);
      if (here) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
    }
    fill(main, current.element);
    current.open?.().catch((e) => announce(e.message, "error"));
    main.focus({ preventScroll: true });
    return;
  }
  location.hash = "#/terminals";
}

function signIn(reason) {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false", size: 40 });
  const form = h("form", { class: "card signin", onsubmit: async (e) => {
    e.preventDefault();
    setToken(input.value);
    await start();
  } },
    h("h2", {}, "Sign in"),
    reason ? h("p", { class: "error", role: "alert" }, reason) : null,
    h("p", {}, "The console uses the daemon's API token. ",
      h("code", {}, "cardbench console"), " prints a link that signs in; or paste the token from ",
      h("code", {}, "api.token"), " in the daemon's runtime directory (", h("code", {}, ".cardbench/run"), " or ",
      h("code", {}, "/run/cardbench"), ")."),
    h("label", { for: "token" }, "API token"), input,
    h("button", { type: "submit", class: "primary" }, "Sign in"));
  fill(main, form);
  input.focus();
}

let stopEvents = null;
async function start() {
  if (!token()) return signIn();
  try {
    const health = await get("/v1/health");
    document.getElementById("clock").textContent = health.clock === "manual" ? "manual clock" : "";
  } catch (e) {
    return signIn(e.status === 401 ? "That token is not this daemon's." : e.message);
  }
  stopEvents?.();
  const live = document.getElementById("live");
  stopEvents = events(dispatch,
    (state) => { live.textContent = state === "live" ? "live" : "reconnecting…"; live.dataset.state = state; });
  show();
}

window.addEventListener("hashchange", () => {
  // A sign-in link opened in a tab already on the console changes only the fragment.
  if (/(?:^#|&)token=/.test(location.hash)) { adoptTokenFromFragment(); start(); return; }
  if (token()) show();
});
window.addEventListener("cardbench-unauthorised", () => { setToken(null); stopEvents?.(); signIn("The daemon refused the token (it makes a new one at each start unless http.token_file names one)."); });
document.getElementById("signout").addEventListener("click", () => { setToken(null); stopEvents?.(); signIn(); });
adoptTokenFromFragment();
start();

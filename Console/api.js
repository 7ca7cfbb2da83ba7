// The daemon's API (docs/openapi.yaml) with the token: the page keeps it in this tab's session
// storage, never in a cookie (so no other site's page can make the browser use it) and never
// in the URL the server sees (the `#token=` link of `cardbench console` is read and removed).

const tokenKey = "cardbench.token";

export function token() { return sessionStorage.getItem(tokenKey); }
export function setToken(value) {
  if (value) sessionStorage.setItem(tokenKey, value.trim());
  else sessionStorage.removeItem(tokenKey);
}

/** Takes a `#token=…` fragment into session storage and out of the address bar. */
export function adoptTokenFromFragment() {
  const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search + "#/terminals");
}

export class APIError extends Error {
  constructor(status, body) {
    super(body?.error ?? `HTTP ${status}`);
    this.status = status;
    this.field = body?.field;
    this.rule = body?.rule;
  }
}

function headers(extra = {}) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** GET, POST or DELETE a path; JSON in and out. Throws APIError with the daemon's message. */
export async function call(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { error: text }; }
  if (response.status === 401) window.dispatchEvent(new CustomEvent("cardbench-unauthorised"));
  if (!response.ok) throw new APIError(response.status, parsed);
  return parsed;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const del = (path) => call("DELETE", path);

/** Downloads a path with the token (a plain link could not send it) and saves it as `name`. */
export async function download(path, name) {
  const response = await fetch(path, { headers: headers() });
  if (!response.ok) throw new APIError(response.status, await response.json().catch(() => null));
  save(await response.blob(), name);
}

/** Saves a blob as the file `name`, as a download. */
export function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * The event stream (`GET /v1/events`, server-sent events), read with fetch: EventSource cannot
 * send the Authorization header. Calls `onEvent({type, terminal, at, data})` for each event and
 * reconnects after a drop; returns a function that stops it.
 */
export function events(onEvent, onState = () => {}) {
  let stopped = false;
  let controller = null;
  async function run() {
    while (!stopped) {
      controller = new AbortController();
      try {
        const response = await fetch("/v1/events", { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
        if (!response.ok) throw new APIError(response.status, null);
        onState("live");
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
            if (data) {
              try { onEvent(JSON.parse(data)); } catch (e) { console.error("event", e); }
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, 1500));
    }
  }
  run();
  return () => { stopped = true; controller?.abort(); };
}

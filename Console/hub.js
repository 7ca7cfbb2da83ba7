// One place the event stream fans out from, so every open view and panel hears it.
const listeners = new Set();

/** Calls `listener(event)` for every event until the returned function is called. */
export function onEvent(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function dispatch(event) {
  for (const listener of [...listeners]) {
    try { listener(event); } catch (e) { console.error("event listener", e); }
  }
}

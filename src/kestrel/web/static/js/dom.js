// Small DOM helpers. Text always goes in through textContent: event data is untrusted.

/** An element with attributes (strings, booleans, or on* handlers) and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = String(value);
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Show or hide an element and set its text (empty text hides it). */
export function say(node, text) {
  node.textContent = text || "";
  node.hidden = !text;
}

/** "3 min ago" for a Unix time in seconds. */
export function age(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export const tokens = (n) => Number(n || 0).toLocaleString("en-US");
export const dollars = (n) => `$${Number(n || 0).toFixed(n && n < 0.01 ? 4 : 2)}`;

/** What a session waits on, in words, or "" when it waits on nothing. */
export function waitingLabel(waitingOn) {
  const words = { approval: "approve a command", plan: "approve the plan", review: "review the change" };
  return waitingOn ? `Waiting for you: ${words[waitingOn] || waitingOn}` : "";
}

/** A status badge: queued, running or idle (and how the run finished). */
export function statusBadge(view) {
  const finished = view.status === "idle" && view.finished ? ` · ${view.finished}` : "";
  return el("span", { class: `badge status-${view.status}`, text: view.status + finished });
}

/** A `<time>` for a Unix time in seconds, as a local date and time. */
export function when(seconds) {
  const at = new Date(seconds * 1000);
  return el("time", { datetime: at.toISOString(), text: at.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" }) });
}

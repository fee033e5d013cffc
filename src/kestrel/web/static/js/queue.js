// Where the tenant's sessions stand in the server's queue: running, waiting for a worker
// (oldest first), and how many workers the server has.

import { call } from "./api.js";
import { el } from "./dom.js";

function links(tag, ids, tasks, label) {
  if (!ids.length) return el("p", { class: "muted", text: "None." });
  return el(tag, { "aria-label": label }, ids.map((id) => el("li", {},
    el("a", { href: `#/sessions/${encodeURIComponent(id)}`, text: tasks.get(id) || id }))));
}

/** The queue as it is now (with each session's task from the sessions list). */
export async function queueSection(signal) {
  const [queue, sessions] = await Promise.all([call("/queue", { signal }), call("/sessions", { signal })]);
  const tasks = new Map(sessions.map((s) => [s.id, s.task]));
  const workers = `${queue.workers} worker${queue.workers === 1 ? "" : "s"}`;
  return el("section", { class: "card queue", "aria-labelledby": "queue-title" },
    el("h2", { id: "queue-title", text: "Queue" }),
    el("p", { "data-figure": "workers", text: `The server runs sessions on ${workers}, for every tenant.` }),
    el("h3", { text: `Running (${queue.running.length})` }),
    links("ul", queue.running, tasks, "Running sessions"),
    el("h3", { text: `Waiting for a worker, oldest first (${queue.queued.length})` }),
    links("ol", queue.queued, tasks, "Waiting sessions, oldest first"));
}

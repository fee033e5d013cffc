// The sessions list, refreshed every few seconds, and the form that starts a new task.

import { call } from "./api.js";
import { el, say, age, tokens, dollars, waitingLabel, statusBadge } from "./dom.js";
import { usageSection } from "./cost.js";

const REFRESH_MS = 3000;

function row(view, sig) {
  const waiting = waitingLabel(view.waiting_on);
  return el("li", { class: "session-row", "data-id": view.id, "data-sig": sig },
    el("div", { class: "row-head" },
      statusBadge(view),
      waiting ? el("span", { class: "badge waiting", text: waiting }) : null),
    el("a", { class: "task", href: `#/sessions/${encodeURIComponent(view.id)}`, text: view.task }),
    el("dl", { class: "facts" },
      el("dt", { text: "Model" }), el("dd", { text: view.model }),
      el("dt", { text: "Started" }), el("dd", { class: "age", text: age(view.created_at) }),
      el("dt", { text: "Tokens" }), el("dd", { text: tokens(view.tokens) }),
      el("dt", { text: "Cost" }), el("dd", { text: dollars(view.cost_usd) })));
}

/** Bring the list up to date, keeping rows that did not change (and the keyboard focus). */
function update(list, views) {
  const focused = document.activeElement?.closest?.(".session-row")?.dataset.id;
  const old = new Map([...list.children].map((li) => [li.dataset.id, li]));
  const rows = views.map((view) => {
    const sig = JSON.stringify(view);
    const kept = old.get(view.id);
    if (!kept || kept.dataset.sig !== sig) return row(view, sig);
    kept.querySelector(".age").textContent = age(view.created_at);
    return kept;
  });
  if (rows.length === list.children.length && rows.every((r, i) => r === list.children[i])) return;
  list.replaceChildren(...rows);
  if (focused) list.querySelector(`[data-id="${CSS.escape(focused)}"] a`)?.focus();
}

async function refresh(box, signal) {
  const views = await call("/sessions", { signal });
  if (signal.aborted) return;
  if (!views.length) {
    box.replaceChildren(el("p", { class: "empty muted", text: "No sessions yet. Start one below." }));
    return;
  }
  let list = box.querySelector("ul.sessions");
  if (!list) box.replaceChildren((list = el("ul", { class: "sessions", "aria-label": "Your sessions" })));
  update(list, views);
}

/** The tenant's usage today; kept as it was when it cannot be fetched. */
async function refreshUsage(usageBox, signal) {
  try {
    const section = await usageSection();
    if (!signal.aborted) usageBox.replaceChildren(section);
  } catch {
    // The sessions' refresh says what went wrong.
  }
}

/** Show the list and the usage today, and keep them fresh; returns a function that stops. */
export function showList(box, flash, usageBox) {
  const stopper = new AbortController();
  usageBox.replaceChildren();
  const tick = async () => {
    refreshUsage(usageBox, stopper.signal);
    try {
      await refresh(box, stopper.signal);
    } catch (err) {
      if (err.name !== "AbortError" && err.status !== 401) say(flash, `Could not list sessions: ${err.message}`);
    }
  };
  tick();
  const timer = setInterval(tick, REFRESH_MS);
  return () => {
    clearInterval(timer);
    stopper.abort();
  };
}

/** The body of POST /sessions from the form's fields. */
function newSessionBody(form) {
  const data = new FormData(form);
  const text = (name) => String(data.get(name) || "").trim();
  const source = data.get("source") === "git"
    ? { git_url: text("git_url"), ...(text("ref") ? { ref: text("ref") } : {}) }
    : { path: text("path") };
  const body = { task: text("task"), source, plan_first: data.get("plan_first") === "on" };
  if (text("model")) body.model = text("model");
  if (text("permission_mode")) body.permission_mode = text("permission_mode");
  return body;
}

/** Wire the new-task form: `started(view)` gets the new session. */
export function wireNewTask(form, error, started) {
  const pathBox = form.querySelector("#source-path");
  const gitBox = form.querySelector("#source-git");
  form.addEventListener("change", () => {
    const git = new FormData(form).get("source") === "git";
    gitBox.hidden = !git;
    pathBox.hidden = git;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say(error, "");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const view = await call("/sessions", { method: "POST", body: newSessionBody(form) });
      form.reset();
      form.dispatchEvent(new Event("change"));
      started(view);
    } catch (err) {
      say(error, `The session was not started: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  });
}

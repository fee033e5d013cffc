// One session, live: its facts, what it waits on, its controls and its event timeline.

import { call } from "./api.js";
import { el, say, tokens, dollars, waitingLabel, statusBadge } from "./dom.js";
import { follow } from "./sse.js";
import { Timeline } from "./timeline.js";
import { approvalsPanel, reviewPanel, planPanel } from "./decisions.js";

const path = (id, rest = "") => `/sessions/${encodeURIComponent(id)}${rest}`;
// Events after which what the session waits on may have changed.
const DECISION_EVENTS = new Set(["approval_requested", "approval_decided", "plan_proposed",
  "plan_decided", "changes_ready", "changes_applied", "session_finished"]);

/** Show session `id` in `root`; returns a function that stops following it. */
export function showSession(id, root, title, flash) {
  const parts = {
    facts: el("div", { class: "facts-line" }),
    connection: el("span", { class: "connection", role: "status", text: "connecting" }),
    controls: el("div", { class: "actions controls" }),
    result: el("p", { class: "flash", role: "status", hidden: true }),
    panel: el("div", { class: "decision" }),
    timeline: el("ol", { class: "timeline", "aria-label": "Events" }),
    followUp: el("div", { class: "follow-up" }),
  };
  root.replaceChildren(...Object.values(parts));
  const state = { id, parts, title, flash, shownFor: null, stale: true, timer: null, again: false };
  const timeline = new Timeline(parts.timeline);
  let stopStream = () => {};

  call(path(id)).then((view) => {
    if (state.stopped) return;
    show(state, view);
    stopStream = follow(id, 0, {
      record(record) {
        timeline.add(record);
        if (DECISION_EVENTS.has(record.event.type)) {
          state.stale = true;
          refresh(state);
        }
      },
      status: () => refresh(state),
      connection: (how) => (parts.connection.textContent = how === "live" ? "live" : "reconnecting…"),
      failed: (err) => say(flash, `Live events stopped: ${err.message}`),
    });
  }).catch((err) => notFound(err, root, title, flash));

  return () => {
    state.stopped = true;
    clearTimeout(state.timer);
    stopStream();
  };
}

function notFound(err, root, title, flash) {
  if (err.status === 401) return; // Signed out already.
  title.textContent = err.status === 404 ? "Session not found" : "Session unavailable";
  root.replaceChildren(el("p", { class: "error", role: "alert", text: err.message }));
  say(flash, "");
}

/** Fetch the session's view soon; triggers that come meanwhile make one more fetch after it. */
function refresh(state) {
  if (state.stopped) return;
  if (state.timer) {
    state.again = true;
    return;
  }
  state.again = false;
  state.timer = setTimeout(async () => {
    try {
      const view = await call(path(state.id));
      if (!state.stopped) show(state, view);
    } catch (err) {
      if (err.status !== 401) say(state.flash, `Could not refresh the session: ${err.message}`);
    } finally {
      state.timer = null;
      if (state.again) refresh(state);
    }
  }, 150);
}

function show(state, view) {
  const { parts } = state;
  state.title.textContent = view.task;
  const waiting = waitingLabel(view.waiting_on);
  const spent = `${view.model} · ${tokens(view.tokens)} tokens · ${dollars(view.cost_usd)}`;
  parts.facts.replaceChildren(statusBadge(view),
    waiting ? el("span", { class: "badge waiting", text: waiting }) : "",
    el("span", { class: "muted", text: spent }));
  controls(state, view);
  followUpBox(state, view);
  const key = `${view.status}/${view.waiting_on}`;
  if (key !== state.shownFor || state.stale) {
    state.shownFor = key;
    state.stale = false;
    decision(state, view);
  }
}

/** The panel for what the session waits on: approvals, the plan, or the review. */
async function decision(state, view) {
  const done = (output) => {
    if (output) say(state.parts.result, output);
    state.stale = true;
    refresh(state);
  };
  const run = (state.panelRun = (state.panelRun || 0) + 1);
  let panel = null;
  try {
    if (view.waiting_on === "approval") panel = await approvalsPanel(view.id, done);
    else if (view.waiting_on === "review" && view.status === "idle") panel = await reviewPanel(view.id, done);
    else if (view.waiting_on === "plan" && view.status === "idle") panel = planPanel(view.id, done);
  } catch (err) {
    panel = el("p", { class: "error", role: "alert", text: err.message });
  }
  if (!state.stopped && run === state.panelRun) state.parts.panel.replaceChildren(...(panel ? [panel] : []));
}

/** Cancel while it runs or waits in the queue; resume once it was stopped. */
function controls(state, view) {
  const box = state.parts.controls;
  const resumable = view.status === "idle" && ["cancelled", "error"].includes(view.finished);
  const want = view.status !== "idle" ? "cancel" : resumable ? "resume" : "";
  if (box.dataset.showing === want) return; // Keep the button (and its focus).
  box.dataset.showing = want;
  if (!want) return box.replaceChildren();
  const button = el("button", { type: "button", class: want === "cancel" ? "danger" : "",
    text: want === "cancel" ? "Cancel" : "Resume" });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await call(path(view.id, `/${want}`), { method: "POST" });
    } catch (err) {
      say(state.parts.result, err.message);
    } finally {
      button.disabled = false;
    }
    refresh(state);
  });
  box.replaceChildren(button);
}

/** The follow-up form while the session is idle (kept as it is while it stays idle). */
function followUpBox(state, view) {
  const box = state.parts.followUp;
  const wanted = view.status === "idle";
  if (wanted === Boolean(box.firstChild)) return; // Keep what is being typed.
  if (!wanted) return box.replaceChildren();
  const text = el("textarea", { id: "follow-up-text", rows: "3", required: true });
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const form = el("form", { class: "card stack" },
    el("label", { for: "follow-up-text", text: "Follow-up message" }), text, error,
    el("div", {}, el("button", { type: "submit", class: "primary", text: "Send" })));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say(error, "");
    try {
      await call(path(view.id, "/messages"), { method: "POST", body: { text: text.value } });
      text.value = "";
      refresh(state);
    } catch (err) {
      say(error, err.message);
    }
  });
  box.replaceChildren(form);
}

// One session, live: its facts, what it waits on, its controls, its cost and checkpoints, and
// its event timeline.

import { call, sessionPath as path } from "./api.js";
import { el, say, tokens, dollars, waitingLabel, statusBadge } from "./dom.js";
import { follow } from "./sse.js";
import { Timeline } from "./timeline.js";
import { approvalsPanel } from "./decisions.js";
import { planPanel } from "./plan.js";
import { reviewPanel } from "./review.js";
import { Checkpoints } from "./checkpoints.js";
import { costSection } from "./cost.js";

// Events after which what the session waits on may have changed.
const DECISION_EVENTS = new Set(["approval_requested", "approval_decided", "plan_proposed",
  "plan_decided", "changes_ready", "changes_applied", "session_finished", "rewound"]);
// Events after which the cost or the checkpoints may have changed.
const SPEND_EVENTS = new Set(["model_completed", "checkpoint_created", "rewound", "session_finished"]);

/** Show session `id` in `root`; returns a function that stops following it. */
export function showSession(id, root, title, flash) {
  const parts = {
    facts: el("div", { class: "facts-line" }),
    connection: el("span", { class: "connection", role: "status", text: "connecting" }),
    controls: el("div", { class: "actions controls" }),
    result: el("p", { class: "flash", role: "status", hidden: true }),
    panel: el("div", { class: "decision" }),
    extras: el("div", { class: "extras" }),
    timeline: el("ol", { class: "timeline", "aria-label": "Events" }),
    followUp: el("div", { class: "follow-up" }),
  };
  root.replaceChildren(...Object.values(parts));
  const state = {
    id, parts, title, flash, shownFor: null, stale: true, panelSeq: 0, timer: null, again: false,
  };
  const timeline = new Timeline(parts.timeline);
  state.checkpoints = new Checkpoints(id, () => {
    state.stale = true;
    refresh(state);
    refreshExtras(state);
  });
  state.cost = el("div", { class: "cost-box" });
  parts.extras.replaceChildren(state.cost, state.checkpoints.root);
  let stopStream = () => {};

  call(path(id)).then((view) => {
    if (state.stopped) return;
    show(state, view);
    refreshExtras(state);
    stopStream = follow(id, 0, {
      record(record) {
        timeline.add(record);
        // Events the panel's view already counted (the log replayed on opening) change nothing.
        if (DECISION_EVENTS.has(record.event.type) && record.seq > state.panelSeq) {
          state.stale = true;
          refresh(state);
        }
        if (SPEND_EVENTS.has(record.event.type)) refreshExtras(state);
      },
      status: () => {
        refresh(state);
        refreshExtras(state);
      },
      connection: (how) => (parts.connection.textContent = how === "live" ? "live" : "reconnecting…"),
      failed: (err) => say(flash, `Live events stopped: ${err.message}`),
    });
  }).catch((err) => notFound(err, root, title, flash));

  return () => {
    state.stopped = true;
    clearTimeout(state.timer);
    clearTimeout(state.extrasTimer);
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

/** Fetch the cost and the checkpoints soon (once for a burst of events). */
function refreshExtras(state) {
  if (state.stopped || state.extrasTimer) return;
  state.extrasTimer = setTimeout(async () => {
    state.extrasTimer = null;
    try {
      const cost = await costSection(state.id);
      if (!state.stopped) state.cost.replaceChildren(cost);
      await state.checkpoints.load();
    } catch (err) {
      if (err.status === 401 || state.stopped) return;
      say(state.flash, `Could not refresh the cost and checkpoints: ${err.message}`);
    }
  }, 300);
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
  state.checkpoints.setIdle(view.status === "idle");
  // A refused decision moves the session to queued and back to idle with nothing logged: the
  // panel (and what is being edited in it) stays; a logged decision makes it stale.
  const key = `${view.status === "running" ? "running" : "stopped"}/${view.waiting_on}`;
  if (key !== state.shownFor || state.stale) {
    state.shownFor = key;
    state.stale = false;
    state.panelSeq = view.last_seq;
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
    else if (view.waiting_on === "plan" && view.status === "idle") panel = await planPanel(view.id, done);
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

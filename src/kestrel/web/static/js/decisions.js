// What the session waits on from the person: approvals, the plan, and the review of its change.

import { call } from "./api.js";
import { el, say } from "./dom.js";
import { renderDiff } from "./diff.js";
import { argumentsText } from "./timeline.js";

const path = (id, rest = "") => `/sessions/${encodeURIComponent(id)}${rest}`;

/** Run `action` with the panel's buttons disabled; show a failure in `error`. */
async function busy(panel, error, action) {
  const buttons = [...panel.querySelectorAll("button")];
  buttons.forEach((b) => (b.disabled = true));
  say(error, "");
  try {
    await action();
  } catch (err) {
    say(error, err.message);
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

function question(id, q, done) {
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const messageId = `deny-${q.call_id}`;
  const message = el("input", { id: messageId, type: "text", placeholder: "optional" });
  const box = el("li", { class: "question card", "data-call": q.call_id });
  const answer = (body) => busy(box, error, async () => {
    await call(path(id, `/approvals/${encodeURIComponent(q.call_id)}`), { method: "POST", body });
    done();
  });
  box.append(
    el("p", {}, el("strong", { text: q.tool }), el("span", { class: "muted", text: ` — ${q.reason}` })),
    el("pre", { class: "arguments", text: argumentsText(q.arguments) }),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", text: "Allow once",
        onclick: () => answer({ allow: true, scope: "once" }) }),
      q.repeatable ? el("button", { type: "button", text: "Allow for this session",
        onclick: () => answer({ allow: true, scope: "session" }) }) : null),
    el("label", { for: messageId, text: "Why you deny it (the model is told)" }),
    el("div", { class: "actions" }, message,
      el("button", { type: "button", class: "danger", text: "Deny",
        onclick: () => answer({ allow: false, message: message.value.trim() }) })),
    error);
  return box;
}

/** The open permission questions with their answers. */
export async function approvalsPanel(id, done) {
  const questions = await call(path(id, "/approvals"));
  const panel = el("section", { class: "panel approvals", "aria-labelledby": "approvals-title" },
    el("h2", { id: "approvals-title", text: "Waiting for your approval" }));
  if (!questions.length) panel.append(el("p", { class: "muted", text: "No open question now." }));
  else panel.append(el("ul", { class: "questions" }, questions.map((q) => question(id, q, done))));
  return panel;
}

/** Fetch the session's patch with the token and save it as a file. */
export async function downloadPatch(id) {
  const blob = await call(path(id, "/patch"), { as: "blob" });
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: `kestrel-${id}.patch`, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The change waiting for review: its diff, apply / discard / send back, and the patch. */
export async function reviewPanel(id, done) {
  const diff = await call(path(id, "/diff"), { as: "text" });
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const feedback = el("textarea", { id: "review-feedback", rows: "2" });
  const panel = el("section", { class: "panel review", "aria-labelledby": "review-title" });
  const review = (body) => busy(panel, error, async () => {
    const result = await call(path(id, "/review"), { method: "POST", body });
    if (!result.ok) throw new Error(result.output || `${body.action} failed`);
    done(result.output);
  });
  panel.append(
    el("h2", { id: "review-title", text: "Review the change" }),
    renderDiff(diff),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", text: "Apply", onclick: () => review({ action: "apply" }) }),
      el("button", { type: "button", class: "danger", text: "Discard", onclick: () => review({ action: "discard" }) }),
      el("button", { type: "button", text: "Download patch",
        onclick: () => busy(panel, error, () => downloadPatch(id)) })),
    el("label", { for: "review-feedback", text: "What to change (sent back to the session)" }),
    feedback,
    el("div", { class: "actions" },
      el("button", { type: "button", text: "Send back",
        onclick: () => review({ action: "reject", feedback: feedback.value.trim() }) })),
    error);
  return panel;
}

/** The plan the session proposed (shown in the timeline): approve it, or reject with feedback. */
export function planPanel(id, done) {
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const feedback = el("textarea", { id: "plan-feedback", rows: "2" });
  const panel = el("section", { class: "panel plan", "aria-labelledby": "plan-title" });
  const decide = (body) => busy(panel, error, async () => {
    await call(path(id, "/plan"), { method: "POST", body });
    done();
  });
  panel.append(
    el("h2", { id: "plan-title", text: "Approve the plan" }),
    el("p", { class: "muted", text: "The proposed plan is the last one in the timeline." }),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", text: "Approve plan",
        onclick: () => decide({ decision: "approve" }) })),
    el("label", { for: "plan-feedback", text: "Why you reject it" }),
    feedback,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "danger", text: "Reject plan",
        onclick: () => decide({ decision: "reject", feedback: feedback.value.trim() }) })),
    error);
  return panel;
}

// What the session waits on from the person: the permission questions (the plan is in plan.js,
// the review in review.js), and how a panel runs an answer.

import { call, sessionPath as path } from "./api.js";
import { el, say } from "./dom.js";
import { argumentsText } from "./timeline.js";

/** Run `action` with the panel's buttons disabled; show a failure in `error`. */
export async function busy(panel, error, action) {
  const buttons = [...panel.querySelectorAll("button")];
  const was = buttons.map((b) => b.disabled);
  buttons.forEach((b) => (b.disabled = true));
  say(error, "");
  try {
    await action();
  } catch (err) {
    say(error, err.message);
  } finally {
    buttons.forEach((b, i) => (b.disabled = was[i]));
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

// The plan a session waits on, as an editable list: rename a step, move it, delete it, add one,
// say which steps come first; then approve it (as edited) or reject it with the reason.
// A plan the server refuses (a step after one that is not there, a cycle) is said in the panel
// and the edit stays as it is.

import { call, sessionPath as path } from "./api.js";
import { el, say } from "./dom.js";
import { busy } from "./decisions.js";

const copy = (step) => ({
  id: step.id, title: step.title, files: [...(step.files || [])],
  checks: [...(step.checks || [])], depends_on: [...(step.depends_on || [])],
});
const ids = (text) => text.split(/[\s,]+/).filter(Boolean);

/** A step id not used by any of `steps`. */
function freshId(steps) {
  const used = new Set(steps.map((s) => s.id));
  let n = steps.length + 1;
  while (used.has(`step-${n}`)) n += 1;
  return `step-${n}`;
}

class PlanEditor {
  constructor(plan) {
    this.original = JSON.stringify({ summary: plan.summary, steps: plan.steps.map(copy) });
    this.summary = plan.summary;
    this.steps = plan.steps.map(copy);
    this.list = el("ol", { class: "plan-steps", "aria-label": "Steps of the plan" });
    this.changed = () => {};
  }

  edited() {
    return JSON.stringify({ summary: this.summary, steps: this.steps }) !== this.original;
  }

  /** Redraw the steps; `focus` names what gets the keyboard focus: [step index, parts...],
   * the first of the parts that can take it. */
  render(focus) {
    this.list.replaceChildren(...this.steps.map((step, i) => this.stepItem(step, i)));
    if (focus) {
      const [index, ...parts] = focus;
      const item = this.list.children[Math.min(index, this.steps.length - 1)];
      const targets = parts.map((part) => item?.querySelector(`[data-part="${part}"]:not(:disabled)`));
      targets.find(Boolean)?.focus();
    }
    this.changed();
  }

  stepItem(step, i) {
    const n = i + 1;
    const title = el("input", { id: `step-title-${n}`, type: "text", value: step.title, "data-part": "title" });
    title.addEventListener("input", () => {
      step.title = title.value;
      this.changed();
    });
    const after = el("input", { id: `step-after-${n}`, type: "text", spellcheck: "false",
      value: step.depends_on.join(", "), placeholder: "none" });
    after.addEventListener("input", () => {
      step.depends_on = ids(after.value);
      this.changed();
    });
    const where = [step.files.length ? `Files: ${step.files.join(", ")}` : "",
      step.checks.length ? `Checks: ${step.checks.join("; ")}` : ""].filter(Boolean).join(" · ");
    const button = (text, part, label, disabled, action) => el("button", {
      type: "button", text, "data-part": part, "aria-label": label, disabled, onclick: action });
    return el("li", { class: "plan-step card", "data-step": step.id },
      el("label", { for: title.id, text: `Step ${n}` }),
      title,
      el("p", { class: "muted step-id", text: `id ${step.id}${where ? ` · ${where}` : ""}` }),
      el("label", { for: after.id, class: "small", text: `Step ${n} comes after (step ids)` }),
      after,
      el("div", { class: "actions" },
        button("Move up", "up", `Move up step ${n}`, i === 0, () => this.move(i, -1)),
        button("Move down", "down", `Move down step ${n}`, i === this.steps.length - 1, () => this.move(i, 1)),
        button("Delete", "delete", `Delete step ${n}`, false, () => this.remove(i))));
  }

  move(i, by) {
    const [step] = this.steps.splice(i, 1);
    this.steps.splice(i + by, 0, step);
    this.render([i + by, ...(by < 0 ? ["up", "down"] : ["down", "up"])]);
  }

  /** Delete step `i`; the steps that came after it no longer wait for it. */
  remove(i) {
    const [gone] = this.steps.splice(i, 1);
    for (const step of this.steps) step.depends_on = step.depends_on.filter((d) => d !== gone.id);
    this.render(this.steps.length ? [i, "title"] : null);
  }

  add() {
    this.steps.push({ id: freshId(this.steps), title: "", files: [], checks: [], depends_on: [] });
    this.render([this.steps.length - 1, "title"]);
  }

  /** What is wrong before asking the server, or "". */
  problem() {
    if (!this.steps.length) return "The plan needs at least one step (or reject it).";
    const blank = this.steps.findIndex((s) => !s.title.trim());
    return blank >= 0 ? `Step ${blank + 1} needs a title.` : "";
  }

  body() {
    if (!this.edited()) return { decision: "approve" };
    const steps = this.steps.map((s) => ({ ...s, title: s.title.trim() }));
    return { decision: "approve", summary: this.summary, steps };
  }
}

/** The plan the session waits on, editable, with approve and reject. */
export async function planPanel(id, done) {
  const plan = await call(path(id, "/plan"));
  const editor = new PlanEditor(plan);
  const error = el("p", { class: "error plan-error", role: "alert", hidden: true });
  const feedback = el("textarea", { id: "plan-feedback", rows: "2" });
  const summary = el("textarea", { id: "plan-summary", rows: "2" });
  summary.value = plan.summary;
  summary.addEventListener("input", () => {
    editor.summary = summary.value;
    editor.changed();
  });
  const approve = el("button", { type: "button", class: "primary", text: "Approve plan" });
  const panel = el("section", { class: "panel plan", "aria-labelledby": "plan-title" });
  const decide = (body) => busy(panel, error, async () => {
    await call(path(id, "/plan"), { method: "POST", body });
    done();
  });
  editor.changed = () => (approve.textContent = editor.edited() ? "Approve as edited" : "Approve plan");
  approve.addEventListener("click", () => {
    const problem = editor.problem();
    if (problem) return say(error, problem);
    return decide(editor.body());
  });
  editor.render();
  panel.append(
    el("h2", { id: "plan-title", text: "Approve the plan" }),
    el("p", { class: "muted", text: "Edit the steps if you like: the session follows the plan you approve." }),
    el("label", { for: "plan-summary", text: "Summary" }), summary,
    editor.list,
    el("div", { class: "actions" },
      el("button", { type: "button", text: "Add a step", onclick: () => editor.add() })),
    el("div", { class: "actions" }, approve),
    error,
    el("label", { for: "plan-feedback", text: "Why you reject it" }),
    feedback,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "danger", text: "Reject plan",
        onclick: () => decide({ decision: "reject", feedback: feedback.value.trim() }) })));
  return panel;
}

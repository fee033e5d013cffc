// A subagent in the timeline: its `task` call opens a group, collapsible, that gathers what the
// session's log says of it (the request, its permission, the agent and model that ran it, how
// it finished and what it spent, its report) and closes once its report is in.

import { el, tokens, dollars } from "./dom.js";

/** The task call's arguments, or {} when they do not parse. */
function taskOf(call) {
  try {
    const value = JSON.parse(call.arguments || "{}");
    return value && typeof value === "object" ? value : {};
  } catch {
    return {};
  }
}

/** Open the group of task call `call` in `timeline`. */
export function subagentGroup(timeline, call) {
  const task = taskOf(call);
  const about = task.description || "a task";
  const title = el("span", { class: "subagent-title", text: `${task.agent || "subagent"}: ${about}` });
  const status = el("span", { class: "tool-status", text: "requested" });
  const nested = el("ol", { class: "timeline nested", "aria-label": `Events of the subagent: ${about}` });
  const output = el("div", { class: "tool-output" });
  const group = el("details", { class: "subagent", open: true },
    el("summary", {}, el("span", { class: "ev-label", text: "Subagent" }), title, " ", status), nested);
  const item = el("li", { class: "ev ev-subagent", "data-call": call.id }, group);
  timeline.root.append(item);
  if (task.prompt) {
    timeline.itemIn(nested, "subagent-prompt", "Asked", el("div", { class: "prose", text: task.prompt }));
  }
  const report = timeline.itemIn(nested, "subagent-report", "Report", output);
  report.hidden = true;
  timeline.tools.set(call.id, {
    item, status, output, nested, title, live: null,
    finished() {
      report.hidden = false;
      nested.append(report); // The report comes last, after how the subagent finished.
      group.open = false;
    },
  });
}

function spent(totals) {
  const t = totals || {};
  const all = (t.input_tokens || 0) + (t.output_tokens || 0);
  const count = (n, word) => `${n || 0} ${word}${n === 1 ? "" : "s"}`;
  const calls = count(t.tool_calls, "tool call");
  return `${count(t.turns, "turn")}, ${calls}, ${tokens(all)} tokens, ${dollars(t.cost_usd)}`;
}

export const SUBAGENTS = {
  subagent_started(e) {
    const tool = this.tool(e.call_id);
    const model = e.model ? ` on ${e.model}${e.role ? ` (the ${e.role} role)` : ""}` : "";
    if (tool?.title) tool.title.textContent = `${e.agent}: ${e.description || "a task"}`;
    this.note(`The ${e.agent} agent started${model}.`, "meta", this.listOf(e.call_id));
  },
  subagent_finished(e) {
    const detail = e.detail ? ` — ${e.detail}` : "";
    const kind = e.reason === "done" ? "meta" : "error";
    this.note(`The ${e.agent} agent finished: ${e.reason}${detail} (${spent(e.totals)}).`, kind, this.listOf(e.call_id))
      .classList.add("subagent-finished");
  },
};

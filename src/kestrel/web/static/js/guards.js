// The guards around the loop, as one-line items of the timeline: the context compacted, a loop
// caught (warned, stopped or recovered from), a budget near its limit, a budget that cannot be
// enforced as set.

import { el, tokens, dollars } from "./dom.js";

/** "12k" for 12,345: the size of a context, roughly. */
const roughly = (n) => (n >= 1000 ? `${Math.round(n / 1000)}k` : String(n));

/** A budget's use in words: "4 of 5 turns", "$0.80 of $1.00", "95 s of 120 s of running time". */
export function budgetText(budget, used, limit) {
  if (budget === "cost" || budget === "cost_per_day") {
    return `${dollars(used)} of ${dollars(limit)}${budget === "cost_per_day" ? " today" : ""}`;
  }
  if (budget === "wall_time") return `${Math.round(used)} s of ${Math.round(limit)} s of running time`;
  const today = budget === "tokens_per_day" ? " today" : "";
  const unit = budget === "turns" ? "turns" : "tokens";
  return `${tokens(used)} of ${tokens(limit)} ${unit}${today}`;
}

/** A one-line item: a short bold tag, then what happened. */
function line(timeline, kind, tag, text) {
  const node = el("li", { class: `ev ev-guard ev-${kind}` },
    el("strong", { class: "ev-tag", text: tag }), " ", el("span", { text }));
  timeline.root.append(node);
  return node;
}

export const GUARDS = {
  context_compacted(e) {
    const sizes = `~${roughly(e.tokens_before)} → ~${roughly(e.tokens_after)} tokens of ${roughly(e.window_tokens)}`;
    line(this, "compacted", "Context compacted",
      `${e.dropped} earlier messages folded into a summary, ${e.kept} kept (${sizes}).`);
  },
  loop_detected(e) {
    const tag = e.action === "stop" ? "Loop: stopped" : "Loop: warned";
    line(this, "loop", tag, e.detail);
  },
  loop_recovered(e) {
    const files = e.checkpoint_id
      ? `files restored to checkpoint ${e.checkpoint_id.slice(0, 12)}`
      : "files left as they were";
    line(this, "loop", "Loop caught",
      `${e.detail}; went back to event ${e.to_seq} (${files}) and asked for a different approach.`);
  },
  budget_warning(e) {
    line(this, "budget", "Budget", `${budgetText(e.budget, e.used, e.limit)} used.`);
  },
  budget_notice(e) {
    line(this, "budget", e.enforced ? "Budget" : "Budget not enforced", e.detail);
  },
};

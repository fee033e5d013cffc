// What a session cost (tokens, the share of input read from the cache, dollars, per model), and
// what the tenant used today against its plan.

import { call, sessionPath as path } from "./api.js";
import { el, tokens, dollars } from "./dom.js";

/** The share of input tokens read from the cache, as "12%", or "none" without input. */
export function cacheShare(spend) {
  const input = spend.input_tokens + spend.cache_write_tokens + spend.cache_read_tokens;
  return input ? `${Math.round((100 * spend.cache_read_tokens) / input)}%` : "none";
}

/** `<dt>`/`<dd>` pairs; each `<dd>` names its figure in data-figure. */
function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.flatMap(([name, figure, text]) => [
    el("dt", { text: name }), el("dd", { "data-figure": figure, text })]));
}

function perModel(models) {
  const columns = ["Model", "Calls", "Tokens", "Cache reads", "Cost"];
  const head = el("tr", {}, columns.map((h) => el("th", { scope: "col", text: h })));
  const rows = models.map((m) => el("tr", { "data-model": m.model },
    el("th", { scope: "row", text: m.model }),
    el("td", { text: tokens(m.calls) }),
    el("td", { text: tokens(m.tokens) }),
    el("td", { text: cacheShare(m) }),
    el("td", { text: dollars(m.cost_usd) + (m.priced ? "" : " (no price)") })));
  return el("div", { class: "table-scroll" }, el("table", { class: "per-model" },
    el("caption", { text: "Per model" }), el("thead", {}, head), el("tbody", {}, rows)));
}

/** The session's cost, fetched now. */
export async function costSection(id) {
  const cost = await call(path(id, "/cost"));
  const estimated = cost.tokens_estimated ? " (estimated)" : "";
  return el("section", { class: "card cost", "aria-labelledby": "cost-title" },
    el("h2", { id: "cost-title", text: "Cost" }),
    facts([
      ["Tokens", "tokens", tokens(cost.tokens) + estimated],
      ["Input", "input", tokens(cost.input_tokens)],
      ["Output", "output", tokens(cost.output_tokens)],
      ["Cache reads", "cache", `${cacheShare(cost)} of input`],
      ["Dollars", "dollars", (cost.cost_known ? "" : "at least ") + dollars(cost.cost_usd)],
      ["Turns", "turns", tokens(cost.turns)],
    ]),
    cost.models.length ? perModel(cost.models) : null);
}

function ofLimit(used, limit, show) {
  return limit === null || limit === undefined ? `${show(used)} (no limit)` : `${show(used)} of ${show(limit)}`;
}

function meter(label, used, limit) {
  if (!limit) return null;
  return el("label", { class: "meter" }, el("span", { text: label }),
    el("meter", { min: "0", max: String(limit), value: String(Math.min(used, limit)) }));
}

function resetsIn(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 3600) return `${Math.ceil(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

/** The tenant's usage today against its plan, fetched now. */
export async function usageSection() {
  const usage = await call("/usage");
  const plan = usage.plan;
  const count = (n) => String(n);
  return el("section", { class: "card usage", "aria-labelledby": "usage-title" },
    el("h2", { id: "usage-title", text: `Today, on the ${plan.name} plan` }),
    facts([
      ["Tokens", "tokens", ofLimit(usage.tokens_today, plan.tokens_per_day, tokens)],
      ["Dollars", "dollars", ofLimit(usage.usd_today, plan.usd_per_day, dollars)],
      ["Running", "running", ofLimit(usage.running, plan.max_concurrent_sessions, count)],
      ["Queued", "queued", ofLimit(usage.queued, plan.max_queued_sessions, count)],
      ["Day resets in", "resets", resetsIn(usage.seconds_until_day_resets)],
    ]),
    el("div", { class: "meters" },
      meter("Tokens of the day's budget", usage.tokens_today, plan.tokens_per_day),
      meter("Dollars of the day's budget", usage.usd_today, plan.usd_per_day)));
}

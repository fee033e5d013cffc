// The session's events as a timeline: user messages, the model's text (assembled from its
// deltas), tool calls with their output (terminal colours kept), permission decisions,
// checkpoints, subagents (a group each), the guards' one-line notes and the finish.
// Each record is applied once, in order: a record at or before the last seq is ignored.

import { el, tokens, dollars } from "./dom.js";
import { AnsiWriter, writeAnsi } from "./ansi.js";
import { GUARDS } from "./guards.js";
import { SUBAGENTS, subagentGroup } from "./subagents.js";

const LONG_OUTPUT = { lines: 12, chars: 1500 };

export class Timeline {
  constructor(root) {
    this.root = root;
    this.lastSeq = 0;
    this.texts = new Map(); // request_id -> the element holding that reply's text
    this.tools = new Map(); // call_id -> { item, status, output }
    this.checkpoints = new Map(); // seq of its checkpoint_created -> [number, label]
  }

  /** Apply one record of the log; returns false for one already applied. */
  add(record) {
    if (record.seq <= this.lastSeq) return false;
    this.lastSeq = record.seq;
    this.root.dataset.lastSeq = String(record.seq);
    const render = RENDER[record.event.type];
    if (render) render.call(this, record.event, record);
    return true;
  }

  item(kind, label, ...body) {
    return this.itemIn(this.root, kind, label, ...body);
  }

  /** An item in `list`: the timeline, or a subagent's group. */
  itemIn(list, kind, label, ...body) {
    const node = el("li", { class: `ev ev-${kind}` }, el("span", { class: "ev-label", text: label }), ...body);
    list.append(node);
    return node;
  }

  note(text, kind = "note", list = this.root) {
    return this.itemIn(list, kind, "", el("span", { text }));
  }

  /** Where the events of call `callId` go: its subagent's group, else the timeline. */
  listOf(callId) {
    return this.tool(callId)?.nested || this.root;
  }

  text(requestId, text, replace = false) {
    let body = this.texts.get(requestId);
    if (!body) {
      if (!text) return;
      body = el("div", { class: "prose" });
      this.item("text", "Kestrel", body).dataset.request = requestId;
      this.texts.set(requestId, body);
    }
    body.textContent = replace ? text : body.textContent + text;
  }

  tool(callId) {
    return this.tools.get(callId);
  }
}

/** A tool call's arguments as readable text: a command as it is, JSON pretty-printed. */
export function argumentsText(raw) {
  try {
    const value = JSON.parse(raw || "{}");
    if (value && typeof value.command === "string" && Object.keys(value).length === 1) return value.command;
    return JSON.stringify(value, null, 2);
  } catch {
    return raw;
  }
}

/** Output in a <pre> (its terminal colours as classes), inside a collapsed <details> when it
 * is long. */
export function outputBlock(text, isError) {
  const pre = writeAnsi(el("pre", { class: isError ? "output failed" : "output" }), text);
  const lines = text.split("\n").length;
  if (lines <= LONG_OUTPUT.lines && text.length <= LONG_OUTPUT.chars) return pre;
  return el("details", { class: "long-output" }, el("summary", { text: `Output (${lines} lines)` }), pre);
}

function files(changes) {
  return (changes || []).map((f) => `${f.status} ${f.path}`).join(", ");
}

const RENDER = {
  ...GUARDS,
  ...SUBAGENTS,
  session_started(e) {
    this.note(`Started on ${e.model} in ${e.permission_mode} mode.`, "meta");
  },
  user_message(e) {
    this.item("user", "You", el("div", { class: "prose", text: e.text }));
  },
  model_text_delta(e) {
    this.text(e.request_id, e.text);
  },
  model_completed(e) {
    if (e.message && e.message.text) this.text(e.request_id, e.message.text, true);
  },
  tool_call_requested(e) {
    if (e.call.name === "task") return subagentGroup(this, e.call);
    const status = el("span", { class: "tool-status", text: "requested" });
    const output = el("div", { class: "tool-output" });
    const item = this.item("tool", e.call.name, status,
      el("pre", { class: "arguments", text: argumentsText(e.call.arguments) }), output);
    item.dataset.call = e.call.id;
    this.tools.set(e.call.id, { item, status, output, live: null });
  },
  approval_requested(e) {
    this.note(`Asked you about ${e.name}: ${e.reason}`, "ask", this.listOf(e.call_id));
    const tool = this.tool(e.call_id);
    if (tool) tool.status.textContent = "waiting for your approval";
  },
  approval_decided(e) {
    const how = e.allow ? `allowed (${e.scope === "session" ? "for this session" : "once"})` : "denied";
    this.note(`You ${how}${e.message ? `: ${e.message}` : ""}.`, "answer");
  },
  permission_decided(e) {
    const why = [e.decided_by, e.reason].filter(Boolean).join(": ");
    const label = e.decision === "allow" ? "Allowed" : "Denied";
    this.itemIn(this.listOf(e.call_id), "permission", label, el("span", { text: why }))
      .classList.add(e.decision === "allow" ? "allowed" : "denied");
  },
  tool_started(e) {
    const tool = this.tool(e.call_id);
    if (tool) tool.status.textContent = "running";
  },
  tool_output_chunk(e) {
    const tool = this.tool(e.call_id);
    if (!tool) return;
    if (!tool.live) {
      tool.output.append((tool.live = el("pre", { class: "output" })));
      tool.writer = new AnsiWriter(tool.live);
    }
    tool.writer.write(e.text);
  },
  tool_finished(e) {
    const tool = this.tool(e.call_id);
    if (!tool) return;
    const code = e.exit_code === null || e.exit_code === undefined ? "" : ` (exit ${e.exit_code})`;
    tool.status.textContent = (e.is_error ? "failed" : e.interrupted ? "interrupted" : "done") + code;
    tool.output.replaceChildren(outputBlock(e.content, e.is_error));
    tool.live = null;
    tool.finished?.(e);
  },
  file_changed(e) {
    const tool = this.tool(e.call_id);
    const line = el("p", { class: "muted", text: `changed ${e.path}` });
    if (tool) tool.output.before(line);
  },
  checkpoint_created(e, record) {
    const number = this.checkpoints.size + 1;
    this.checkpoints.set(record.seq, [number, e.label]);
    const changed = files(e.changes);
    this.item("checkpoint", `Checkpoint ${number}`, el("span", { text: e.label + (changed ? ` — ${changed}` : "") }));
  },
  rewound(e) {
    const [number, label] = this.checkpoints.get(e.to_seq) || [];
    const where = number ? `checkpoint ${number} (${label})` : `the checkpoint of event ${e.to_seq}`;
    this.note(`The files were rewound to ${where}.`, "rewound");
  },
  changes_ready(e) {
    this.note(`The change is ready for review: ${e.summary || files(e.files)}.`, "ready");
  },
  changes_applied(e) {
    const problems = (e.problems || []).length ? ` (${e.problems.join("; ")})` : "";
    this.note(`The change was ${e.outcome}${problems}.`, "applied");
  },
  plan_proposed(e) {
    const steps = el("ol", {}, (e.steps || []).map((s) => el("li", { text: s.title })));
    this.item("plan", "Plan", el("div", { class: "prose", text: e.summary }), steps);
  },
  plan_decided(e) {
    const how = e.edited ? " as you edited it" : "";
    const item = this.note(`The plan was ${e.decision}${how}${e.reason ? `: ${e.reason}` : ""}.`, "answer");
    if (e.edited) item.append(el("ol", {}, (e.steps || []).map((s) => el("li", { text: s.title }))));
  },
  verification_finished(e) {
    this.note(e.report || (e.ok ? "Checks passed." : "Checks failed."), e.ok ? "meta" : "error");
  },
  cancel_requested() {
    this.note("You asked the session to stop.", "answer");
  },
  model_retrying(e) {
    this.note(`The model failed (${e.error_kind}); trying again.`, "meta");
  },
  error(e) {
    this.note(e.message, "error");
  },
  session_finished(e) {
    const t = e.totals || {};
    const spent = `${tokens((t.input_tokens || 0) + (t.output_tokens || 0))} tokens, ${dollars(t.cost_usd)}`;
    const detail = e.detail ? ` — ${e.detail}` : "";
    this.item("finished", "Finished", el("span", { text: `${e.reason}${detail} (${spent})` }));
  },
};

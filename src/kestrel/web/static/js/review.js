// The change waiting for review: its diff per file, unified or side by side (the choice kept in
// localStorage), whose lines take comments, and apply, discard, send back (with the comments and
// an overall note, as one message to the model), download patch.

import { call, sessionPath as path } from "./api.js";
import { el, say } from "./dom.js";
import { busy } from "./decisions.js";
import { VIEWS, parseDiff, placeOf, renderDiff } from "./diff.js";

const MAX_FEEDBACK = 10_000; // What the server takes.
const VIEW_KEY = "kestrel.diffView";

/** The diff view last chosen in this browser ("unified" unless "split" was). */
export function savedView() {
  try {
    return localStorage.getItem(VIEW_KEY) === "split" ? "split" : "unified";
  } catch {
    return "unified"; // Storage refused (a private window's settings): the default.
  }
}

function saveView(view) {
  try {
    localStorage.setItem(VIEW_KEY, view);
  } catch {
    // Not kept: the choice holds for this page only.
  }
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

/** The message the model gets: each comment under the file, line and text it is about, then
 * the overall note. */
export function feedbackText(comments, note) {
  const parts = comments.map(({ line, text }) => {
    const quoted = line.text.length > 200 ? `${line.text.slice(0, 200)}…` : line.text;
    const said = text.split("\n").map((l) => `  ${l}`).join("\n");
    return `On ${placeOf(line)}:\n  ${quoted}\n${said}`;
  });
  if (parts.length) parts.unshift("Comments on lines of the change:");
  if (note) parts.push(parts.length ? `Overall: ${note}` : note);
  return parts.join("\n\n");
}

/** The comments being written on the diff's lines, one box under each line commented on; the
 * boxes move to the rows of the other view when the view changes. */
class LineComments {
  constructor() {
    this.open = []; // { line, box, text }
    this.made = 0;
    this.rows = new Map(); // line -> the row that shows it in the diff on the page
    this.order = []; // The diff's lines, in order.
    this.changed = () => {};
  }

  /** Show the comments under the rows of a newly drawn diff of `lines`. */
  follow(lines, rows) {
    [this.order, this.rows] = [lines, rows];
    for (const entry of this.open) this.place(entry);
  }

  /** Put a comment's box under its line's row, after the boxes already there. */
  place(entry) {
    let anchor = this.rows.get(entry.line);
    while (anchor?.nextElementSibling?.classList.contains("line-comment")) anchor = anchor.nextElementSibling;
    anchor?.after(entry.box);
  }

  /** The comment button of `line` in the diff on the page. */
  button(line) {
    const label = `Comment on ${placeOf(line)}`;
    return [...(this.rows.get(line)?.querySelectorAll("button.comment-on") || [])]
      .find((b) => b.getAttribute("aria-label") === label);
  }

  /** Open (or go back to) the comment box of `line`, shown under its row. */
  at(line) {
    const known = this.open.find((c) => c.line === line);
    if (known) return known.text.focus();
    this.made += 1;
    const text = el("textarea", { id: `line-comment-${this.made}`, rows: "2" });
    const entry = { line, text };
    const remove = el("button", { type: "button", text: "Remove comment",
      "aria-label": `Remove comment on ${placeOf(line)}` });
    entry.box = el("div", { class: "line-comment" },
      el("label", { for: text.id, text: `Your comment on ${placeOf(line)}` }), text,
      el("div", { class: "actions" }, remove));
    remove.addEventListener("click", () => {
      this.open = this.open.filter((c) => c !== entry);
      entry.box.remove();
      this.button(line)?.focus();
      this.changed();
    });
    text.addEventListener("input", () => this.changed());
    this.place(entry);
    this.open.push(entry);
    text.focus();
    this.changed();
  }

  /** The comments with text, in the diff's order. */
  written() {
    const at = (c) => this.order.indexOf(c.line);
    return [...this.open].sort((a, b) => at(a) - at(b))
      .map(({ line, text }) => ({ line, text: text.value.trim() }))
      .filter((c) => c.text);
  }
}

/** The diff with its view switch: Unified or Side by side, the one showing pressed. */
function diffView(text, comments) {
  const lines = parseDiff(text);
  const holder = el("div", { class: "diff-holder" });
  const buttons = Object.entries(VIEWS).map(([view, label]) => el("button", {
    type: "button", class: "view-choice", "data-view": view, text: label, onclick: () => show(view) }));
  const show = (view) => {
    saveView(view);
    buttons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.view === view)));
    const diff = renderDiff(lines, view, (line) => comments.at(line));
    holder.replaceChildren(diff);
    comments.follow(lines, diff.rows);
  };
  show(savedView());
  return [el("div", { class: "actions view-switch", role: "group", "aria-label": "Show the diff" }, buttons), holder];
}

/** The review panel of session `id`; `done(output)` once the change was decided. */
export async function reviewPanel(id, done) {
  const diff = await call(path(id, "/diff"), { as: "text" });
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const note = el("textarea", { id: "review-feedback", rows: "2" });
  const panel = el("section", { class: "panel review", "aria-labelledby": "review-title" });
  const comments = new LineComments();
  const sendBack = el("button", { type: "button", text: "Send back" });
  comments.changed = () => {
    const n = comments.written().length;
    sendBack.textContent = n ? `Send back with comments (${n})` : "Send back";
  };
  const review = (body) => busy(panel, error, async () => {
    const result = await call(path(id, "/review"), { method: "POST", body });
    if (!result.ok) throw new Error(result.output || `${body.action} failed`);
    done(result.output);
  });
  sendBack.addEventListener("click", () => {
    const feedback = feedbackText(comments.written(), note.value.trim());
    if (!feedback) return say(error, "Say what to change: comment on a line or write a note.");
    if (feedback.length > MAX_FEEDBACK) {
      return say(error, `That is ${feedback.length} characters; the server takes ${MAX_FEEDBACK} at most.`);
    }
    return review({ action: "reject", feedback });
  });
  panel.append(
    el("h2", { id: "review-title", text: "Review the change" }),
    el("p", { class: "muted", text: "The + button on a line adds a comment on it, sent back with the note below." }),
    ...diffView(diff, comments),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", text: "Apply", onclick: () => review({ action: "apply" }) }),
      el("button", { type: "button", class: "danger", text: "Discard", onclick: () => review({ action: "discard" }) }),
      el("button", { type: "button", text: "Download patch",
        onclick: () => busy(panel, error, () => downloadPatch(id)) })),
    el("label", { for: "review-feedback", text: "What to change (sent back to the session)" }),
    note,
    el("div", { class: "actions" }, sendBack),
    error);
  return panel;
}

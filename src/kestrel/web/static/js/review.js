// The change waiting for review: its diff, whose lines take comments, and apply, discard, send
// back (with the comments and an overall note, as one message to the model), download patch.

import { call, sessionPath as path } from "./api.js";
import { el, say } from "./dom.js";
import { busy } from "./decisions.js";
import { placeOf, renderDiff } from "./diff.js";

const MAX_FEEDBACK = 10_000; // What the server takes.

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

/** The comments being written on the diff's lines, one box under each line commented on. */
class LineComments {
  constructor() {
    this.open = []; // { line, box, text }
    this.made = 0;
    this.changed = () => {};
  }

  /** Open (or go back to) the comment box of `line`, shown under its `row`. */
  at(line, row) {
    const known = this.open.find((c) => c.line === line);
    if (known) return known.text.focus();
    this.made += 1;
    const text = el("textarea", { id: `line-comment-${this.made}`, rows: "2" });
    const entry = { line, text };
    const remove = el("button", { type: "button", text: "Remove comment",
      "aria-label": `Remove the comment on ${placeOf(line)}` });
    entry.box = el("div", { class: "line-comment" },
      el("label", { for: text.id, text: `Your comment on ${placeOf(line)}` }), text,
      el("div", { class: "actions" }, remove));
    remove.addEventListener("click", () => {
      this.open = this.open.filter((c) => c !== entry);
      entry.box.remove();
      row.querySelector("button")?.focus();
      this.changed();
    });
    text.addEventListener("input", () => this.changed());
    row.after(entry.box);
    this.open.push(entry);
    text.focus();
    this.changed();
  }

  /** The comments with text, in the diff's order. */
  written() {
    const before = (a, b) => (a.box.compareDocumentPosition(b.box) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
    return [...this.open].sort(before)
      .map(({ line, text }) => ({ line, text: text.value.trim() }))
      .filter((c) => c.text);
  }
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
    renderDiff(diff, (line, row) => comments.at(line, row)),
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

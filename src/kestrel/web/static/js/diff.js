// A unified diff as lines coloured by kind (added, removed, context, hunk and file headers),
// each line of a file's content knowing its file and line number, so it can take a comment.

import { el } from "./dom.js";

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
const pathOf = (name) => (name === "/dev/null" ? "" : name.replace(/^[ab]\//, ""));

/** The diff's lines: {text, kind, file, line, old} where `line` is the number in the new file
 * (the old one for a removed line, then `old` is true); kinds: file, meta, hunk, add, del,
 * context. Inside a hunk lines are counted, so a removed "--- x" is not a file header. */
export function parseDiff(text) {
  const lines = [];
  let file = "";
  let oldNo = 0;
  let newNo = 0;
  let left = 0; // Lines of the current hunk still to come (old and new sides together).
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const hunk = line.match(HUNK);
    if (left > 0 && !hunk && !line.startsWith("\\")) {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "context";
      const old = kind === "del";
      lines.push({ text: line, kind, file, line: old ? oldNo : newNo, old });
      if (kind !== "add") oldNo += 1;
      if (kind !== "del") newNo += 1;
      left -= kind === "context" ? 2 : 1;
      continue;
    }
    if (hunk) {
      [oldNo, newNo] = [Number(hunk[1]), Number(hunk[3])];
      left = Number(hunk[2] ?? 1) + Number(hunk[4] ?? 1);
      lines.push({ text: line, kind: "hunk", file });
    } else if (line.startsWith("--- ") || line.startsWith("+++ ")) {
      const named = pathOf(line.slice(4).split("\t")[0]);
      if (named) file = named;
      lines.push({ text: line, kind: "file", file });
    } else {
      const git = line.match(/^diff --git a\/(.*) b\/(.*)$/);
      if (git) file = git[2];
      lines.push({ text: line, kind: "meta", file });
    }
  }
  return lines;
}

/** Where a line is, in words: "made.txt line 2" (or "line 2 of the old made.txt"). */
export function placeOf(line) {
  return line.old ? `line ${line.line} of the old ${line.file}` : `${line.file} line ${line.line}`;
}

/**
 * The diff as an element; `comment(line, row)` (when given) is called by the small button each
 * line of content gets. An empty diff says so.
 */
export function renderDiff(text, comment) {
  if (!text.trim()) return el("p", { class: "muted", text: "The change is empty." });
  const box = el("div", { class: "diff", role: "group", "aria-label": "The change, as a unified diff" });
  for (const line of parseDiff(text)) {
    const commentable = comment && line.line !== undefined;
    const row = el("div", { class: "diff-row" });
    row.append(
      commentable
        ? el("button", { type: "button", class: "comment-on", text: "+", "aria-label": `Comment on ${placeOf(line)}`,
          title: "Comment on this line", onclick: () => comment(line, row) })
        : el("span", { class: "gutter" }),
      el("span", { class: `line ${line.kind}`, text: line.text || " " }));
    box.append(row);
  }
  return box;
}

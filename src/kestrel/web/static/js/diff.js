// A unified diff, parsed into lines that know their file and line numbers (so each can take a
// comment), grouped by file, and shown per file either unified or side by side, the code
// highlighted by its file's language.

import { el } from "./dom.js";
import { highlighted, languageOf } from "./highlight.js";

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
const pathOf = (name) => (name === "/dev/null" ? "" : name.replace(/^[ab]\//, ""));
/** Header lines the file's heading already says (its name, its blob ids). */
const hidden = (l) => l.kind === "file" || (l.kind === "meta" && /^(diff --git |index )/.test(l.text));

export const VIEWS = { unified: "Unified", split: "Side by side" };

/** The diff's lines: {text, kind, file, line, old, oldNo, newNo} where `line` is the number in
 * the new file (the old one for a removed line, then `old` is true); kinds: file, meta, hunk,
 * add, del, context. Inside a hunk lines are counted, so a removed "--- x" is not a file
 * header. */
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
      lines.push({ text: line, kind, file, line: old ? oldNo : newNo, old,
        oldNo: kind === "add" ? null : oldNo, newNo: old ? null : newNo });
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

/** The diff's files in order: {name, lines, added, removed}; a file starts at its
 * `diff --git` line, or at its `---` line in a diff without them. */
export function diffFiles(lines) {
  const files = [];
  let current = null;
  let named = []; // The names its ---/+++ lines gave.
  for (const line of lines) {
    const opens = (line.kind === "meta" && line.text.startsWith("diff --git "))
      || (line.kind === "file" && line.text.startsWith("--- ") && (!current || current.hunks));
    if (opens || !current) {
      current = { name: "", lines: [], added: 0, removed: 0, hunks: 0 };
      named = [];
      files.push(current);
    }
    current.lines.push(line);
    if (line.kind === "file") named.push(pathOf(line.text.slice(4).split("\t")[0]));
    if (line.kind === "hunk") current.hunks += 1;
    if (line.kind === "add") current.added += 1;
    if (line.kind === "del") current.removed += 1;
    const [from, to] = named;
    current.name = from && to && from !== to ? `${from} → ${to}` : line.file || current.name;
  }
  return files.filter((f) => f.name || f.lines.some((l) => !hidden(l) && l.text.trim()));
}

/** Where a line is, in words: "made.txt line 2" (or "line 2 of the old made.txt"). */
export function placeOf(line) {
  return line.old ? `line ${line.line} of the old ${line.file}` : `${line.file} line ${line.line}`;
}

/**
 * The diff's `lines` (from parseDiff) as an element, per file, in view `view` ("unified" or
 * "split"); `comment(line)` (when given) is called by the small button each line of content
 * gets. The element's `rows` maps each line of content to the row that shows it (a comment
 * box goes after it). An empty diff says so.
 */
export function renderDiff(lines, view, comment) {
  if (!lines.some((l) => l.kind !== "meta" || l.text.trim())) {
    return Object.assign(el("p", { class: "muted", text: "The change is empty." }), { rows: new Map() });
  }
  const label = view === "split" ? "The change, side by side" : "The change, as a unified diff";
  const box = el("div", { class: `diff diff-${view}`, role: "group", "aria-label": label });
  box.rows = new Map();
  for (const file of diffFiles(lines)) box.append(fileSection(file, view, comment, box.rows));
  return box;
}

function fileSection(file, view, comment, rows) {
  const language = languageOf(file.lines.find((l) => l.file)?.file || "");
  const body = el("div", { class: "diff-body" });
  const shown = file.lines.filter((l) => !hidden(l));
  const row = (line) => contentRow(line, language, comment);
  if (view === "split") splitRows(shown, language, comment, rows, body);
  else {
    for (const line of shown) {
      const made = line.oldNo !== undefined ? row(line) : noteRow(line);
      if (line.oldNo !== undefined) rows.set(line, made);
      body.append(made);
    }
  }
  const counts = el("span", { class: "file-counts" },
    el("span", { class: "plus", text: `+${file.added}` }), " ",
    el("span", { class: "minus", text: `-${file.removed}` }));
  return el("details", { class: "diff-file", open: true, "data-file": file.name },
    el("summary", {}, el("span", { class: "file-name", text: file.name || "(no file)" }), " ", counts),
    body);
}

/** A hunk header or a note (a mode, a rename, "no newline at end of file") across the row. */
function noteRow(line) {
  return el("div", { class: "diff-row note-row" }, el("span", { class: "gutter" }),
    el("span", { class: `line ${line.kind}`, text: line.text || " " }));
}

function commentButton(line, comment) {
  return el("button", { type: "button", class: "comment-on", text: "+", "aria-label": `Comment on ${placeOf(line)}`,
    title: "Comment on this line", onclick: () => comment(line) });
}

/** The sign and the code of a line of content, the code highlighted. */
function code(line, language) {
  const sign = line.text.slice(0, 1);
  return el("span", { class: `line ${line.kind}` },
    el("span", { class: "sign", text: sign }), ...highlighted(line.text.slice(1), language),
    line.text.length > 1 ? "" : " ");
}

function number(n) {
  return el("span", { class: "num", "aria-hidden": "true", text: n === null ? "" : String(n) });
}

/** A row of the unified view: button, old and new numbers, the line. */
function contentRow(line, language, comment) {
  return el("div", { class: "diff-row" },
    comment ? commentButton(line, comment) : el("span", { class: "gutter" }),
    number(line.oldNo), number(line.newNo), code(line, language));
}

/** One side of a side-by-side row: button (on the side a comment is about), number, line. */
function half(line, side, language, comment) {
  if (!line) {
    return el("div", { class: "half void" },
      el("span", { class: "gutter" }), el("span", { class: "num" }), el("span", { class: "line blank" }));
  }
  const about = comment && (line.kind === "context" ? side === "new" : true);
  return el("div", { class: `half ${side}` },
    about ? commentButton(line, comment) : el("span", { class: "gutter" }),
    number(side === "old" ? line.oldNo : line.newNo), code(line, language));
}

/** Rows of the side-by-side view: context on both sides; a run of removed lines beside the run
 * of added lines that follows it. */
function splitRows(shown, language, comment, rows, body) {
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i += 1) {
      const [del, add] = [dels[i], adds[i]];
      const made = el("div", { class: "diff-row split-row" },
        half(del, "old", language, comment), half(add, "new", language, comment));
      if (del) rows.set(del, made);
      if (add) rows.set(add, made);
      body.append(made);
    }
    [dels, adds] = [[], []];
  };
  for (const line of shown) {
    if (line.kind === "del") {
      if (adds.length) flush();
      dels.push(line);
    } else if (line.kind === "add") adds.push(line);
    else {
      flush();
      if (line.kind !== "context") body.append(noteRow(line));
      else {
        const made = el("div", { class: "diff-row split-row" },
          half(line, "old", language, null), half(line, "new", language, comment));
        rows.set(line, made);
        body.append(made);
      }
    }
  }
  flush();
}

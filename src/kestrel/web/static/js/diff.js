// A unified diff as lines coloured by kind: added, removed, hunk headers and file headers.

import { el } from "./dom.js";

function kindOf(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "file";
  if (line.startsWith("diff ") || line.startsWith("index ") || line.startsWith("new file")) return "meta";
  if (line.startsWith("deleted file") || line.startsWith("rename ") || line.startsWith("similarity")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "context";
}

/** A <pre> showing `text`; an empty diff says so. */
export function renderDiff(text) {
  if (!text.trim()) return el("p", { class: "muted", text: "The change is empty." });
  const lines = text.replace(/\n$/, "").split("\n");
  const pre = el("pre", { class: "diff", tabindex: "0", "aria-label": "The change, as a unified diff" });
  // Each line is a block of its own (its background spans the width), so no "\n" between.
  for (const line of lines) pre.append(el("span", { class: `line ${kindOf(line)}`, text: line || " " }));
  return pre;
}

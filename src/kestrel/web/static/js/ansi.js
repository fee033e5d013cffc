// Terminal output with its colours: SGR codes (colour, bold, dim, italic, underline) become
// spans with classes; every other escape sequence (cursor moves, titles, clearing) is dropped.
// Text goes in as text nodes only. Output streams in chunks, so a sequence cut between two
// chunks is held until the rest comes.

import { el } from "./dom.js";

// CSI (ESC [ params intermediates final), OSC (ESC ] ... BEL or ESC \), character set
// designations (ESC ( B) and the other short escapes.
const SEQUENCE = /\x1b(?:\[([0-?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+#%][ -~]|[0-~])/g;
// A sequence begun at the end of a chunk and not finished there.
const UNFINISHED = /\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[()*+#%])?$/;
// Control characters that mean nothing in a page (tab and newline stay; a lone CR is dropped).
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;

const PLAIN = Object.freeze({ fg: null, bg: null, bold: false, dim: false, italic: false, underline: false });

/** The style after SGR parameters `params` ("1;31", "" for a reset) applied to `style`. */
export function applySgr(style, params) {
  const next = { ...style };
  const codes = params === "" ? [0] : params.split(";").map((p) => Number(p || 0));
  for (let i = 0; i < codes.length; i += 1) {
    const code = codes[i];
    if (code === 0) Object.assign(next, PLAIN);
    else if (code === 1) next.bold = true;
    else if (code === 2) next.dim = true;
    else if (code === 3) next.italic = true;
    else if (code === 4) next.underline = true;
    else if (code === 22) [next.bold, next.dim] = [false, false];
    else if (code === 23) next.italic = false;
    else if (code === 24) next.underline = false;
    else if (code >= 30 && code <= 37) next.fg = code - 30;
    else if (code >= 90 && code <= 97) next.fg = code - 90 + 8;
    else if (code === 39) next.fg = null;
    else if (code >= 40 && code <= 47) next.bg = code - 40;
    else if (code >= 100 && code <= 107) next.bg = code - 100 + 8;
    else if (code === 49) next.bg = null;
    else if (code === 38 || code === 48) {
      // 256 colours (5;n) keep their first 16 as named ones; the others and 24-bit colours
      // (2;r;g;b) show as the default colour.
      const key = code === 38 ? "fg" : "bg";
      const n = codes[i + 2];
      next[key] = codes[i + 1] === 5 && n >= 0 && n < 16 ? n : null;
      i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0;
    }
  }
  return next;
}

/** The classes of a style: ansi-fg-N / ansi-bg-N (N 0-15), ansi-bold, ansi-dim, ... */
export function classesOf(style) {
  const names = [];
  if (style.fg !== null) names.push(`ansi-fg-${style.fg}`);
  if (style.bg !== null) names.push(`ansi-bg-${style.bg}`);
  for (const flag of ["bold", "dim", "italic", "underline"]) if (style[flag]) names.push(`ansi-${flag}`);
  return names.join(" ");
}

/** Writes terminal output into an element, chunk by chunk. */
export class AnsiWriter {
  constructor(target) {
    this.target = target;
    this.style = PLAIN;
    this.held = ""; // The start of a sequence the next chunk finishes.
  }

  /** Add a chunk of output. */
  write(chunk) {
    let text = this.held + chunk;
    const cut = text.match(UNFINISHED);
    this.held = cut ? cut[0] : "";
    if (cut) text = text.slice(0, cut.index);
    let from = 0;
    for (const found of text.matchAll(SEQUENCE)) {
      this.put(text.slice(from, found.index));
      from = found.index + found[0].length;
      if (found[2] === "m") this.style = applySgr(this.style, found[1]);
    }
    this.put(text.slice(from));
  }

  put(text) {
    const clean = text.replace(/\r\n/g, "\n").replace(CONTROL, "");
    if (!clean) return;
    const names = classesOf(this.style);
    const last = this.target.lastChild;
    if (!names && last?.nodeType === Node.TEXT_NODE) last.appendData(clean);
    else if (names && last?.nodeType === Node.ELEMENT_NODE && last.className === names) last.append(clean);
    else this.target.append(names ? el("span", { class: names, text: clean }) : clean);
  }
}

/** Output as an element's children: `pre` gets the text of `text`, with its colours. */
export function writeAnsi(pre, text) {
  new AnsiWriter(pre).write(text);
  return pre;
}

/** The text of terminal output with every escape sequence taken out. */
export function stripAnsi(text) {
  return text.replace(SEQUENCE, "").replace(/\r\n/g, "\n").replace(CONTROL, "");
}

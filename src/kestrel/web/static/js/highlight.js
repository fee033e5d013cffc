// Syntax highlighting of code lines with the bundled Prism (vendor/prism, loaded by the page as
// a classic script with `data-manual`, so it never touches the page by itself). Prism's token
// list is turned into spans with classes here, the text put in as text: no markup is made from
// the code. Without Prism, or for a language it does not know, a line is plain text.

import { el } from "./dom.js";

const LANGUAGES = {
  py: "python", pyi: "python",
  js: "javascript", mjs: "javascript", cjs: "javascript", jsx: "javascript",
  ts: "typescript", mts: "typescript", cts: "typescript", tsx: "typescript",
  go: "go",
  rs: "rust",
  json: "json",
  sh: "bash", bash: "bash", zsh: "bash",
};

/** The language of a file by its name ("" when none is known). */
export function languageOf(path) {
  const name = path.split("/").pop() || "";
  const dot = name.lastIndexOf(".");
  return dot > 0 ? LANGUAGES[name.slice(dot + 1).toLowerCase()] || "" : "";
}

function grammar(language) {
  const prism = globalThis.Prism;
  return language && prism && prism.languages ? prism.languages[language] : undefined;
}

/** The nodes of `text` highlighted as `language`: spans with `tok-TYPE` classes (and the
 * token's aliases) around the tokens, text nodes between. */
export function highlighted(text, language) {
  const rules = grammar(language);
  if (!rules || !text) return [text];
  try {
    return globalThis.Prism.tokenize(text, rules).map(node);
  } catch {
    return [text]; // A grammar that fails on odd input leaves the line as it is.
  }
}

function node(token) {
  if (typeof token === "string") return token;
  const aliases = [].concat(token.alias || []).map((a) => `tok-${a}`);
  const content = Array.isArray(token.content) ? token.content.map(node) : [node(token.content)];
  return el("span", { class: [`tok-${token.type}`, ...aliases].join(" ") }, content);
}

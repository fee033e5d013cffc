// The session's checkpoints, oldest first, each with "Rewind here": a dialog confirms it and
// takes an optional message the session then runs on with.

import { call, sessionPath as path } from "./api.js";
import { el, say } from "./dom.js";

function changedFiles(cp) {
  const files = cp.files.map((f) => `${f.status} ${f.old_path ? `${f.old_path} → ` : ""}${f.path}`);
  if (cp.more_files) files.push(`and ${cp.more_files} more`);
  return files.length ? files.join(", ") : "no file changed";
}

function clock(seconds) {
  const when = new Date(seconds * 1000);
  return el("time", { datetime: when.toISOString(), text: when.toLocaleTimeString() });
}

export class Checkpoints {
  /** The checkpoints of session `id`; `rewound()` is called after a rewind. */
  constructor(id, rewound) {
    this.id = id;
    this.rewound = rewound;
    this.items = [];
    this.idle = false;
    this.list = el("ol", { class: "checkpoint-list", "aria-label": "Checkpoints, oldest first" });
    this.dialog = this.makeDialog();
    this.root = el("section", { class: "card checkpoints", "aria-labelledby": "checkpoints-title" },
      el("h2", { id: "checkpoints-title", text: "Checkpoints" }), this.list, this.dialog);
  }

  async load() {
    this.items = await call(path(this.id, "/checkpoints"));
    this.render();
  }

  /** Rewinding waits until the session is idle. */
  setIdle(idle) {
    if (idle === this.idle) return;
    this.idle = idle;
    this.render();
  }

  render() {
    if (!this.items.length) {
      const none = "None yet: one is recorded when a tool changes a file.";
      this.list.replaceChildren(el("li", { class: "muted", text: none }));
      return;
    }
    const focused = this.list.contains(document.activeElement)
      ? document.activeElement.closest("li")?.dataset.number : undefined;
    this.list.replaceChildren(...this.items.map((cp) => el("li", { class: "checkpoint", "data-number": cp.number },
      el("span", { class: "cp-number", text: `${cp.number}` }),
      el("div", { class: "cp-body" },
        el("strong", { text: cp.label }),
        cp.rewound ? el("span", { class: "badge", text: "rewound past" }) : null,
        el("div", { class: "muted cp-files", text: changedFiles(cp) }),
        el("div", { class: "muted" }, clock(cp.created_at))),
      el("button", { type: "button", text: "Rewind here", "aria-label": `Rewind here: checkpoint ${cp.number}`,
        disabled: !this.idle, title: this.idle ? null : "Rewind once the session stops",
        onclick: () => this.confirm(cp) }))));
    if (focused) this.list.querySelector(`li[data-number="${focused}"] button`)?.focus();
  }

  makeDialog() {
    this.title = el("h2", { id: "rewind-title" });
    this.what = el("p");
    this.message = el("textarea", { id: "rewind-message", rows: "3" });
    this.error = el("p", { class: "error", role: "alert", hidden: true });
    this.go = el("button", { type: "button", class: "primary", text: "Rewind", onclick: () => this.rewind() });
    const dialog = el("dialog", { class: "rewind-dialog", "aria-labelledby": "rewind-title" },
      this.title, this.what,
      el("label", { for: "rewind-message", text: "Then do (optional: the session runs on with this message)" }),
      this.message, this.error,
      el("div", { class: "actions" }, this.go,
        el("button", { type: "button", text: "Keep as is", onclick: () => dialog.close() })));
    return dialog;
  }

  confirm(cp) {
    this.chosen = cp;
    this.title.textContent = `Rewind to checkpoint ${cp.number}?`;
    this.what.textContent = `The session's files go back to how they were at "${cp.label}"; `
      + "what changed after it is undone (the log keeps it).";
    this.message.value = "";
    say(this.error, "");
    this.dialog.showModal();
  }

  async rewind() {
    const body = { checkpoint: this.chosen.id };
    const message = this.message.value.trim();
    if (message) body.message = message;
    this.go.disabled = true;
    say(this.error, "");
    try {
      await call(path(this.id, "/rewind"), { method: "POST", body });
      this.dialog.close();
      this.rewound();
    } catch (err) {
      say(this.error, err.message);
    } finally {
      this.go.disabled = false;
    }
  }
}

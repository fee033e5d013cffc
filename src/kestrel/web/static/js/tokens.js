// The tenant's API tokens (never their secrets), revoking one behind a confirmation, and the box
// that shows a token just issued: its secret, once.

import { el, say, when } from "./dom.js";

const nameOf = (t) => (t.label ? `"${t.label}"` : t.id);

export class TokenList {
  /** `revoke(token)` revokes one once confirmed (it rejects with the server's refusal), and
   * `revoked(token)` follows once the dialog closed. */
  constructor(revoke, revoked) {
    this.revoke = revoke;
    this.revoked = revoked;
    this.list = el("ul", { class: "token-list", "aria-label": "Tokens, oldest first" });
    this.dialog = this.makeDialog();
    this.root = el("section", { class: "card tokens", "aria-labelledby": "tokens-title" },
      el("h2", { id: "tokens-title", tabindex: "-1", text: "Tokens" }), this.list, this.dialog);
  }

  render(tokens, users) {
    const names = new Map(users.map((u) => [u.id, u.name]));
    if (!tokens.length) {
      this.list.replaceChildren(el("li", { class: "muted", text: "No tokens." }));
      return;
    }
    this.list.replaceChildren(...tokens.map((t) => this.row(t, names.get(t.user_id) || t.user_id)));
  }

  row(t, user) {
    const revoked = t.revoked_at !== null && t.revoked_at !== undefined;
    return el("li", { class: `token-row${revoked ? " revoked" : ""}`, "data-id": t.id },
      el("div", { class: "row-head" },
        el("strong", { text: t.label || "(no label)" }),
        el("span", { class: `badge ${revoked ? "revoked" : "active"}`, text: revoked ? "revoked" : "active" })),
      el("dl", { class: "facts" },
        el("dt", { text: "ID" }), el("dd", {}, el("code", { text: t.id })),
        el("dt", { text: "User" }), el("dd", { text: user }),
        el("dt", { text: "Starts" }), el("dd", {}, el("code", { text: `${t.prefix}…` })),
        el("dt", { text: "Created" }), el("dd", {}, when(t.created_at)),
        revoked ? [el("dt", { text: "Revoked" }), el("dd", {}, when(t.revoked_at))] : null),
      revoked ? null : el("div", { class: "actions" },
        el("button", { type: "button", class: "danger", text: "Revoke",
          "aria-label": `Revoke token ${nameOf(t)} of ${user}`, onclick: () => this.confirm(t, user) })));
  }

  makeDialog() {
    this.title = el("h2", { id: "revoke-title" });
    this.what = el("p");
    this.error = el("p", { class: "error", role: "alert", hidden: true });
    this.go = el("button", { type: "button", class: "danger", text: "Revoke", onclick: () => this.confirmed() });
    const dialog = el("dialog", { class: "revoke-dialog", "aria-labelledby": "revoke-title" },
      this.title, this.what, this.error,
      el("div", { class: "actions" },
        el("button", { type: "button", autofocus: true, text: "Keep it", onclick: () => dialog.close() }), this.go));
    return dialog;
  }

  confirm(t, user) {
    this.chosen = t;
    this.title.textContent = `Revoke token ${nameOf(t)}?`;
    this.what.textContent = `Requests with it (${user}'s, starting ${t.prefix}…) are refused from now on. `
      + "This cannot be undone: issue a new token instead.";
    say(this.error, "");
    this.dialog.showModal();
  }

  async confirmed() {
    this.go.disabled = true;
    say(this.error, "");
    try {
      await this.revoke(this.chosen);
      this.dialog.close();
      this.revoked(this.chosen);
    } catch (err) {
      say(this.error, `Not revoked: ${err.message}`);
    } finally {
      this.go.disabled = false;
    }
  }
}

/** Copy `text`, or select it for the person to copy where the browser does not allow it. */
async function copy(text, node, status) {
  try {
    await navigator.clipboard.writeText(text);
    say(status, "Copied.");
  } catch {
    getSelection().selectAllChildren(node);
    say(status, "The browser does not let the page copy: the token is selected, copy it with Ctrl+C or ⌘C.");
  }
}

/** The box with a token just issued: its secret, a Copy button, and `done()` to forget it. */
export function secretBox(issued, user, done) {
  const secret = el("code", { id: "new-secret", "aria-label": "The new token", text: issued.secret });
  const status = el("p", { role: "status", hidden: true });
  return el("section", { class: "card secret", "aria-labelledby": "secret-title" },
    el("h2", { id: "secret-title", text: "New token: copy it now" }),
    el("p", { text: `The token for ${user}${issued.token.label ? ` ("${issued.token.label}")` : ""}. `
      + "It will not be shown again: once you leave this page, only its first characters are known." }),
    secret,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", text: "Copy", onclick: () => copy(issued.secret, secret, status) }),
      el("button", { type: "button", text: "Done, hide it", onclick: done })),
    status);
}

// The Administration view, for a tenant's admins: the tenant and its plan, its users and tokens,
// adding a user, issuing a token (its secret shown once) and revoking one, and the queue. Anyone
// else sees the server's refusal and nothing more.

import { call } from "./api.js";
import { el, say, when } from "./dom.js";
import { TokenList, secretBox } from "./tokens.js";
import { queueSection } from "./queue.js";

const REFRESH_MS = 3000;

function field(id, label, control) {
  return [el("label", { for: id, text: label }), control];
}

function options(values) {
  return values.map(([value, text]) => el("option", { value, text }));
}

class Admin {
  constructor(box, flash, signal) {
    this.box = box;
    this.flash = flash;
    this.signal = signal;
    this.users = [];
    this.facts = el("dl", { class: "facts" });
    this.userRows = el("tbody");
    this.status = el("p", { class: "muted", role: "status", hidden: true });
    this.secret = el("div");
    this.queue = el("div");
    this.tokens = new TokenList((t) => this.revoke(t), (t) => this.revoked(t));
    this.userChoice = el("select", { id: "token-user", name: "user_id", required: true });
  }

  async load() {
    try {
      const tenant = await call("/tenant", { signal: this.signal });
      if (this.signal.aborted) return;
      if (!this.box.firstChild) this.build();
      this.render(tenant);
    } catch (err) {
      if (err.name === "AbortError" || err.status === 401) return;
      if (err.status === 403) this.box.replaceChildren(el("p", { class: "error", role: "alert", text: err.message }));
      else say(this.flash, `Could not load the tenant: ${err.message}`);
      throw err;
    }
  }

  build() {
    this.box.replaceChildren(
      el("section", { class: "card", "aria-labelledby": "tenant-title" },
        el("h2", { id: "tenant-title", text: "Tenant" }), this.facts),
      el("section", { class: "card", "aria-labelledby": "users-title" },
        el("h2", { id: "users-title", text: "Users" }),
        el("div", { class: "table-scroll" }, el("table", { class: "users" },
          el("thead", {}, el("tr", {}, ["Name", "Role", "Created"].map((h) => el("th", { scope: "col", text: h })))),
          this.userRows))),
      el("div", { class: "admin-forms" }, this.addUserForm(), this.issueForm()),
      this.secret,
      this.status,
      this.tokens.root,
      this.queue);
  }

  render(tenant) {
    this.users = tenant.users;
    this.facts.replaceChildren(
      el("dt", { text: "Name" }), el("dd", { "data-figure": "name", text: tenant.name }),
      el("dt", { text: "Plan" }), el("dd", { "data-figure": "plan", text: tenant.plan }),
      el("dt", { text: "ID" }), el("dd", {}, el("code", { text: tenant.id })));
    this.userRows.replaceChildren(...tenant.users.map((u) => el("tr", { "data-id": u.id },
      el("td", { text: u.name }), el("td", { text: u.role }), el("td", {}, when(u.created_at)))));
    const chosen = this.userChoice.value;
    this.userChoice.replaceChildren(...options(tenant.users.map((u) => [u.id, `${u.name} (${u.role})`])));
    if (tenant.users.some((u) => u.id === chosen)) this.userChoice.value = chosen;
    this.tokens.render(tenant.tokens, tenant.users);
  }

  addUserForm() {
    const name = el("input", { id: "new-user-name", name: "name", type: "text", required: true, maxlength: "100", autocomplete: "off" });
    const role = el("select", { id: "new-user-role", name: "role" }, options([["member", "member"], ["admin", "admin"]]));
    return this.form("add-user", "Add a user", "Add user", [
      ...field("new-user-name", "Name", name), ...field("new-user-role", "Role", role)],
    async () => {
      const made = await call("/tenant/users", { method: "POST", body: { name: name.value.trim(), role: role.value } });
      await this.load();
      this.userChoice.value = made.id;
      return `Added ${made.name} as ${made.role}.`;
    });
  }

  issueForm() {
    const label = el("input", { id: "token-label", name: "label", type: "text", maxlength: "100", autocomplete: "off" });
    return this.form("issue-token", "Issue a token", "Issue token", [
      ...field("token-user", "For user", this.userChoice), ...field("token-label", "Label (optional)", label)],
    async () => {
      const body = { user_id: this.userChoice.value, label: label.value.trim() };
      const issued = await call("/tenant/tokens", { method: "POST", body });
      const user = this.users.find((u) => u.id === issued.token.user_id)?.name || issued.token.user_id;
      this.secret.replaceChildren(secretBox(issued, user, () => this.forgetSecret())); // Shown first: only now.
      this.secret.querySelector("button").focus();
      await this.load();
      return "";
    });
  }

  /** A form whose submit runs `send()`, which answers what to say under the button. */
  form(id, title, button, fields, send) {
    const error = el("p", { class: "error", role: "alert", hidden: true });
    const note = el("p", { class: "muted", role: "status", hidden: true });
    const submit = el("button", { type: "submit", class: "primary", text: button });
    const form = el("form", { class: "stack", "aria-labelledby": `${id}-title` },
      fields, error, el("div", {}, submit), note);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      say(error, "");
      say(note, "");
      submit.disabled = true;
      try {
        const said = await send();
        const chosen = this.userChoice.value;
        form.reset();
        this.userChoice.value = chosen;
        say(note, said);
      } catch (err) {
        if (err.status !== 401 && err.name !== "AbortError") say(error, err.message);
      } finally {
        submit.disabled = false;
      }
    });
    return el("section", { class: "card" }, el("h2", { id: `${id}-title`, text: title }), form);
  }

  revoke(t) {
    return call(`/tenant/tokens/${encodeURIComponent(t.id)}`, { method: "DELETE", as: "text" });
  }

  async revoked(t) {
    say(this.status, `Revoked token ${t.label || t.id}.`);
    this.tokens.root.querySelector("h2").focus();
    try {
      await this.load();
    } catch {
      // load() said what went wrong.
    }
  }

  forgetSecret() {
    this.secret.replaceChildren();
    this.tokens.root.querySelector("h2").focus();
  }

  async refreshQueue() {
    try {
      const section = await queueSection(this.signal);
      const sig = section.textContent + [...section.querySelectorAll("a")].map((a) => a.href).join();
      if (this.signal.aborted || sig === this.queueSig) return;
      this.queueSig = sig;
      this.queue.replaceChildren(section);
    } catch (err) {
      if (err.name !== "AbortError" && err.status !== 401) say(this.flash, `Could not read the queue: ${err.message}`);
    }
  }
}

/** Show the Administration view in `box`; returns a function that stops it and forgets any
 * secret it showed. */
export function showAdmin(box, flash) {
  const stopper = new AbortController();
  const admin = new Admin(box, flash, stopper.signal);
  box.replaceChildren();
  let timer;
  admin.load().then(() => {
    if (stopper.signal.aborted) return;
    admin.refreshQueue();
    timer = setInterval(() => admin.refreshQueue(), REFRESH_MS);
  }, () => {});
  return () => {
    clearInterval(timer);
    stopper.abort();
    box.replaceChildren();
  };
}

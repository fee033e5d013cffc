// The panel's entry point: sign-in, and a hash router over the sessions list, one session and
// the administration (offered in the header to admins only).

import { call, token, whenUnauthorized } from "./api.js";
import { say } from "./dom.js";
import { showList, wireNewTask } from "./list.js";
import { showSession } from "./session.js";
import { showAdmin } from "./admin.js";

const $ = (id) => document.getElementById(id);
const views = ["sign-in", "list", "session", "admin"];
let stopView = () => {};
let probed = ""; // The token whose role was asked.

function open(name) {
  views.forEach((v) => ($(v).hidden = v !== name));
  $("sign-out").hidden = name === "sign-in";
  if (name === "admin") $("admin-link").setAttribute("aria-current", "page");
  else $("admin-link").removeAttribute("aria-current");
}

/** Offer Administration in the header to an admin's token (GET /me says whose it is). */
async function offerAdmin() {
  const key = token.get();
  if (probed === key) return;
  probed = key;
  $("admin-link").hidden = true;
  try {
    const who = await call("/me");
    $("admin-link").hidden = who.role !== "admin" || token.get() !== key;
  } catch {
    // Refused or unreachable: nothing to offer; the view that asked says why.
  }
}

/** Show what the address names: `#/sessions/ID`, `#/admin`, else the list; sign-in without a
 * token. */
function route() {
  stopView();
  stopView = () => {};
  if (!token.get()) {
    open("sign-in");
    $("token").focus();
    return;
  }
  const match = location.hash.match(/^#\/sessions\/([^/]+)$/);
  if (location.hash === "#/admin") {
    open("admin");
    stopView = showAdmin($("admin-body"), $("flash"));
  } else if (match) {
    open("session");
    $("session-title").textContent = "Session";
    stopView = showSession(decodeURIComponent(match[1]), $("session-body"), $("session-title"), $("flash"));
  } else {
    open("list");
    stopView = showList($("sessions"), $("flash"), $("usage"));
  }
  showPlan();
  offerAdmin();
}

async function showPlan() {
  try {
    const usage = await call("/usage");
    $("plan").textContent = `Plan ${usage.plan.name} · today ${usage.tokens_today.toLocaleString("en-US")} tokens`;
  } catch {
    $("plan").textContent = "";
  }
}

function signOut(message) {
  token.clear();
  probed = "";
  $("admin-link").hidden = true;
  $("plan").textContent = "";
  say($("flash"), "");
  say($("sign-in-error"), message || "");
  route();
}

async function signIn(event) {
  event.preventDefault();
  const key = $("token").value.trim();
  say($("sign-in-error"), "");
  try {
    await call("/sessions", { key }); // Checks the token; nothing is stored until it works.
  } catch (err) {
    const why = err.status === 401 ? "The server refused this token." : err.message;
    say($("sign-in-error"), why);
    return;
  }
  token.set(key);
  $("sign-in-form").reset();
  say($("flash"), "");
  route();
  $("main").focus();
}

whenUnauthorized(signOut);
$("sign-in-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => signOut("You signed out."));
wireNewTask($("new-task-form"), $("new-task-error"), (view) => {
  location.hash = `#/sessions/${encodeURIComponent(view.id)}`;
});
window.addEventListener("hashchange", () => {
  say($("flash"), "");
  route();
});
route();

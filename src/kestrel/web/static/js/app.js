// The panel's entry point: sign-in, and a hash router over the sessions list and one session.

import { call, token, whenUnauthorized } from "./api.js";
import { say } from "./dom.js";
import { showList, wireNewTask } from "./list.js";
import { showSession } from "./session.js";

const $ = (id) => document.getElementById(id);
const views = ["sign-in", "list", "session"];
let stopView = () => {};

function open(name) {
  views.forEach((v) => ($(v).hidden = v !== name));
  $("sign-out").hidden = name === "sign-in";
}

/** Show what the address names: `#/sessions/ID`, else the list; sign-in without a token. */
function route() {
  stopView();
  stopView = () => {};
  if (!token.get()) {
    open("sign-in");
    $("token").focus();
    return;
  }
  const match = location.hash.match(/^#\/sessions\/([^/]+)$/);
  if (match) {
    open("session");
    $("session-title").textContent = "Session";
    stopView = showSession(decodeURIComponent(match[1]), $("session-body"), $("session-title"), $("flash"));
  } else {
    open("list");
    stopView = showList($("sessions"), $("flash"), $("usage"));
  }
  showPlan();
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

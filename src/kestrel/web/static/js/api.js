// The /v1 API with the token kept in this tab's sessionStorage (never a URL, never logged).

const KEY = "kestrel.token";

export const token = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

/** The API path of session `id`, and of `rest` under it. */
export const sessionPath = (id, rest = "") => `/sessions/${encodeURIComponent(id)}${rest}`;

/** A refused or failed request: the HTTP status and the server's message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Called when the server refuses the token (401): the app sends the person to sign in. */
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** Headers for a call with `key` (the stored token unless another is given). */
export function authHeaders(key = token.get(), extra = {}) {
  return { Authorization: `Bearer ${key}`, ...extra };
}

/** fetch() one /v1 path; throws ApiError for an error answer. `as`: "json", "text" or "blob". */
export async function call(path, { method = "GET", body, as = "json", key, signal } = {}) {
  const headers = authHeaders(key);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let answer;
  try {
    answer = await fetch(`/v1${path}`, {
      method, headers, signal, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "the server cannot be reached");
  }
  if (!answer.ok) throw await errorOf(answer, key === undefined);
  if (as === "blob") return answer.blob();
  if (as === "text") return answer.text();
  return answer.json();
}

/** The ApiError for an error answer; a 401 on the stored token signs the person out. */
export async function errorOf(answer, stored = true) {
  let message = `${answer.status} ${answer.statusText}`;
  try {
    message = (await answer.json()).error.message || message;
  } catch {
    // Not the API's error body: keep the status line.
  }
  if (answer.status === 401 && stored) onUnauthorized("The server refused your token; sign in again.");
  return new ApiError(answer.status, message);
}

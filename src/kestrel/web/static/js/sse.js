// Live events over fetch() streaming: EventSource cannot send an Authorization header.
// The last event id is kept, and a dropped stream reconnects with Last-Event-ID, so nothing
// is lost and nothing comes twice.

import { authHeaders, errorOf } from "./api.js";

/** Split SSE text into messages; returns the parsed ones and the unfinished rest. */
export function parseSse(buffer) {
  const messages = [];
  const blocks = buffer.replace(/\r\n?/g, "\n").split("\n\n");
  const rest = blocks.pop();
  for (const block of blocks) {
    const message = { id: null, event: "message", data: [] };
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue; // A comment: the keep-alive.
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") message.id = value;
      else if (field === "event") message.event = value;
      else if (field === "data") message.data.push(value);
    }
    if (message.data.length) messages.push({ ...message, data: message.data.join("\n") });
  }
  return { messages, rest };
}

/**
 * Follow a session's events from after `after`. Handlers: record(rec), status(name),
 * connection("live" | "reconnecting"), failed(ApiError) for a refusal that ends the stream.
 * Returns a function that stops following.
 */
export function follow(sessionId, after, handlers) {
  const stopper = new AbortController();
  let lastId = after;
  let wait = 500;

  async function once() {
    const headers = authHeaders();
    if (lastId > 0) headers["Last-Event-ID"] = String(lastId);
    const url = `/v1/sessions/${encodeURIComponent(sessionId)}/events/stream`;
    const answer = await fetch(url, { headers, signal: stopper.signal, cache: "no-store" });
    if (!answer.ok) throw await errorOf(answer);
    handlers.connection("live");
    wait = 500;
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const parsed = parseSse(buffer + value);
      buffer = parsed.rest;
      for (const message of parsed.messages) deliver(message);
    }
  }

  function deliver(message) {
    const data = JSON.parse(message.data);
    if (message.event === "status") return handlers.status(data.status);
    if (message.id !== null && Number(message.id) <= lastId) return; // Seen already.
    if (message.id !== null) lastId = Number(message.id);
    handlers.record(data);
  }

  (async () => {
    while (!stopper.signal.aborted) {
      try {
        await once();
      } catch (err) {
        if (stopper.signal.aborted) return;
        if (err.status && err.status < 500) return handlers.failed(err); // 401, 404: final.
      }
      if (stopper.signal.aborted) return;
      handlers.connection("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 4000);
    }
  })();
  return () => stopper.abort();
}

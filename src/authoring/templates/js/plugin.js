// {{name}}: a hookrelay plugin written in JavaScript.
//
// Build it with `hookrelay plugin build`, or by hand from this folder: `npm ci` (or
// `npm install`), then `npm run build`, which writes build/{{name}}.wasm. The build must keep
// `--disable http fetch-event` (package.json): the relay offers no wasi:http.
//
// The relay calls `init` once per instance, then `onEvent` for every (event, hook) pair in
// the plugin's scope. Edit these two functions; the rest is plumbing.
//
// WIT names become camelCase here: `on-event` is `onEvent`, `get-raw` is `hook.getRaw`,
// `internal-meeting-id` is `event.internalMeetingId`. u64 values (`event.timestamp`,
// `hook.id`) are BigInts; an absent option<string> is `undefined`.

import { getConfig, log } from 'bbb:relay/host@0.2.0';

// Settings from the [config] table of {{name}}.toml, read once by `init`.
// getConfig gives strings as they are and other TOML values as JSON text,
// so `keep_chat = true` comes back as the string "true".
let keepChat = false;
let site;

export function init() {
  keepChat = (getConfig('keep_chat') ?? '').trim() === 'true';
  site = getConfig('site');
  // To reject the plugin (e.g. a missing or wrong setting): throw 'why'.
  log('info', '{{name}} ready');
  // The event ids this plugin wants; every other event passes it untouched.
  // Return [] to see every event (slower: every event then costs a call).
  return ['user-joined', 'chat-group-message-sent'];
}

// Return { tag: 'keep' }, { tag: 'drop' } or { tag: 'replace', val: jsonText }.
export function onEvent(event, hook) {
  if (event.id === 'chat-group-message-sent') {
    return keepChat ? { tag: 'keep' } : { tag: 'drop' };
  }

  // A hook that asked for raw events gets the bus message (event.raw);
  // the others get the processed event.
  const payload = hook.getRaw ? event.raw : event.processed;
  let doc;
  try {
    doc = JSON.parse(payload);
  } catch {
    return { tag: 'keep' };
  }

  // Only processed events have data.attributes; raw messages are left as they are.
  if (hook.getRaw || site === undefined) {
    return { tag: 'keep' };
  }
  const attributes = doc?.data?.attributes;
  if (attributes === null || typeof attributes !== 'object' || Array.isArray(attributes)) {
    return { tag: 'keep' };
  }
  attributes.site = site;
  // JSON.stringify keeps the key order of the parsed event.
  return { tag: 'replace', val: JSON.stringify(doc) };
}

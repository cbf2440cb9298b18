// chat-format: turns BigBlueButton events into one-line chat messages, in the JSON that the
// incoming webhooks of Mattermost, Slack and Rocket.Chat accept: {"text": "..."}.
//
//   {"text":"John Doe joined \"Math 101\" (moderator)","channel":"town-square"}
//
// Events it does not announce are dropped for the hooks in its scope (or kept, with
// `others = "keep"`). The message is made from the processed event, also for raw hooks.
// Build: `npm install`, then `npm run build` (writes build/chat-format.wasm). Keep
// `--disable http fetch-event` in that script: the relay offers no wasi:http.
//
// [config] keys (all optional):
//   events     ids to announce (default: DEFAULT_EVENTS below; see SENTENCES for the choice)
//   others     "drop" (default) or "keep": what happens to the other events
//   channel, username, icon_url   copied into the message when set (Mattermost and
//              Slack's legacy webhooks honour them; others ignore unknown keys)
//   escape     true (default): write &, < and > in names as &amp; &lt; &gt;, which Slack
//              requires; set it to false if the chat shows those entities literally

import { getConfig, log } from 'bbb:relay/host@0.1.0';

const DEFAULT_EVENTS = [
  'meeting-created',
  'meeting-ended',
  'user-joined',
  'user-left',
  'rap-publish-ended',
];

// How many meeting and user names are remembered (user-left and most meeting events do
// not carry names). The oldest are forgotten first.
const MAX_MEETINGS = 1000;
const MAX_USERS = 10000;

const settings = {
  announce: new Set(DEFAULT_EVENTS),
  keepOthers: false,
  extra: {},
  escape: true,
};

const meetingNames = new Map();
const userNames = new Map();

// Map keeps insertion order: delete first so that a name seen again counts as the newest.
function remember(map, key, value, max) {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    map.delete(map.keys().next().value);
  }
}

function text(value) {
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

function escapeName(name) {
  if (!settings.escape) return name;
  return name.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

function meetingLabel(event, attrs) {
  const meeting = attrs?.meeting;
  const name =
    text(meeting?.name) ??
    meetingNames.get(event.internalMeetingId) ??
    text(attrs?.recording?.name) ??
    text(meeting?.['external-meeting-id']) ??
    event.externalMeetingId ??
    event.internalMeetingId;
  return name === undefined ? 'a meeting' : `"${escapeName(name)}"`;
}

function userKey(event, user) {
  return `${event.internalMeetingId ?? ''}/${user?.['internal-user-id'] ?? ''}`;
}

function userLabel(event, attrs) {
  const user = attrs?.user;
  const name = text(user?.name) ?? userNames.get(userKey(event, user));
  if (name !== undefined) return escapeName(name);
  const id = text(user?.['external-user-id']);
  return id === undefined ? 'A user' : `User ${escapeName(id)}`;
}

function userDetails(user) {
  const details = [];
  if (user?.role === 'MODERATOR') details.push('moderator');
  if (user?.guest === true) details.push('guest');
  return details.length ? ` (${details.join(', ')})` : '';
}

// One function per event id this plugin can announce: (event, attributes or undefined) to
// the message text.
const SENTENCES = {
  'meeting-created': (e, a) => `Meeting ${meetingLabel(e, a)} was created`,
  'meeting-ended': (e, a) => `Meeting ${meetingLabel(e, a)} ended`,
  'meeting-recording-started': (e, a) => `Recording started in ${meetingLabel(e, a)}`,
  'meeting-recording-stopped': (e, a) => `Recording stopped in ${meetingLabel(e, a)}`,
  'user-joined': (e, a) =>
    `${userLabel(e, a)} joined ${meetingLabel(e, a)}${userDetails(a?.user)}`,
  'user-left': (e, a) => `${userLabel(e, a)} left ${meetingLabel(e, a)}`,
  'rap-publish-ended': (e, a) => {
    if (a?.success === false) {
      return `Publishing the recording of ${meetingLabel(e, a)} failed`;
    }
    const link = text(a?.recording?.playback?.link);
    const published = `The recording of ${meetingLabel(e, a)} is published`;
    return link === undefined ? published : `${published}: ${link}`;
  },
  'rap-published': (e, a) => `The recording of ${meetingLabel(e, a)} was published`,
  'rap-unpublished': (e, a) => `The recording of ${meetingLabel(e, a)} was unpublished`,
  'rap-deleted': (e, a) => `The recording of ${meetingLabel(e, a)} was deleted`,
};

function configString(key) {
  const value = getConfig(key);
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

// A refusal of `init` (a thrown string) rejects the plugin with this message.
function refuse(message) {
  throw `chat-format: ${message}`;
}

export function init() {
  const events = getConfig('events');
  if (events !== undefined) {
    let ids;
    try {
      ids = JSON.parse(events);
    } catch {
      ids = undefined;
    }
    if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string')) {
      refuse('`events` must be an array of event ids');
    }
    const unknown = ids.filter((id) => !Object.hasOwn(SENTENCES, id));
    if (unknown.length) {
      refuse(`no message for ${unknown.join(', ')}; known: ${Object.keys(SENTENCES).join(', ')}`);
    }
    settings.announce = new Set(ids);
  }

  const others = configString('others') ?? 'drop';
  if (others !== 'drop' && others !== 'keep') {
    refuse('`others` must be "drop" or "keep"');
  }
  settings.keepOthers = others === 'keep';

  for (const key of ['channel', 'username', 'icon_url']) {
    const value = configString(key);
    if (value !== undefined) settings.extra[key] = value;
  }

  const escape = configString('escape') ?? 'true';
  if (escape !== 'true' && escape !== 'false') {
    refuse('`escape` must be true or false');
  }
  settings.escape = escape === 'true';

  log('info', `chat-format: announcing ${[...settings.announce].join(', ') || 'nothing'}`);
  if (settings.keepOthers) {
    // Only these reach onEvent; the others pass untouched without a call. The names the
    // messages use come from these two events.
    return [...new Set([...settings.announce, 'meeting-created', 'user-joined'])];
  }
  // Every event: the ones not announced are dropped.
  return [];
}

export function onEvent(event, _hook) {
  const wanted = settings.announce.has(event.id);
  const learns = event.id === 'meeting-created' || event.id === 'user-joined';
  if (!wanted && !learns) {
    return settings.keepOthers ? { tag: 'keep' } : { tag: 'drop' };
  }

  // Always the processed form: for a raw hook it is there too, and the message replaces
  // the raw payload all the same.
  let attrs;
  try {
    attrs = JSON.parse(event.processed)?.data?.attributes;
  } catch {
    log('warn', `chat-format: ${event.id} is not valid JSON; using the typed fields`);
  }

  const meetingName = text(attrs?.meeting?.name);
  if (event.id === 'meeting-created' && meetingName && event.internalMeetingId) {
    remember(meetingNames, event.internalMeetingId, meetingName, MAX_MEETINGS);
  }
  const userName = text(attrs?.user?.name);
  if (event.id === 'user-joined' && userName && attrs.user['internal-user-id']) {
    remember(userNames, userKey(event, attrs.user), userName, MAX_USERS);
  }
  if (!wanted) {
    return settings.keepOthers ? { tag: 'keep' } : { tag: 'drop' };
  }

  const message = { text: SENTENCES[event.id](event, attrs), ...settings.extra };
  return { tag: 'replace', val: JSON.stringify(message) };
}

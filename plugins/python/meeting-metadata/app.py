"""meeting-metadata, in Python: the port of plugins/meeting-metadata (Rust).

BigBlueButton sends a meeting's metadata only in `meeting-created`. This plugin keeps the
`metadata` object of every `meeting-created` it sees, per internal meeting id, and adds it as
`data.attributes.meeting.metadata` to the later events of that meeting that lack that key.
`meeting-ended` gets it one last time, then the meeting is forgotten.

Processed payloads only: for raw hooks the plugin still learns and forgets meetings but
returns keep. The state lives in the instance and is lost when the relay restarts, when the
plugin is reloaded and when its instance is rebuilt after a failure.

Config: `max_meetings` (default 10000), how many open meetings are remembered; beyond that
the oldest one is forgotten.

Build, from this folder, with componentize-py 0.25.1 (pip install componentize-py==0.25.1):

    componentize-py --wit-path wit --world plugin componentize app -o build/meeting-metadata.wasm
"""

import json
from collections import deque

import wit_world
from componentize_py_types import Err
from wit_world.imports import host
from wit_world.imports.types import Action_Keep, Action_Replace, Event, Hook, Level

DEFAULT_MAX_MEETINGS = 10_000

# `meeting-ended` is called once per hook that gets it: the metadata of the last few ended
# meetings stays available so that each of those calls can still add it.
RECENTLY_ENDED = 32


class Meetings:
    """Open meetings' metadata, oldest first (dicts keep insertion order)."""

    def __init__(self) -> None:
        self.max_meetings = DEFAULT_MAX_MEETINGS
        self.open: dict = {}
        self.ended: deque = deque(maxlen=RECENTLY_ENDED)

    def remember(self, meeting: str, metadata: dict) -> None:
        if any(known == meeting for known, _ in self.ended):
            self.ended = deque(
                ((m, d) for m, d in self.ended if m != meeting), maxlen=RECENTLY_ENDED
            )
        # Removed first, so that a meeting created again counts as the newest.
        self.open.pop(meeting, None)
        self.open[meeting] = metadata
        if len(self.open) > self.max_meetings:
            oldest = next(iter(self.open))
            del self.open[oldest]
            host.log(
                Level.WARN,
                f"meeting-metadata: more than {self.max_meetings} open meetings; forgot {oldest}",
            )

    def end(self, meeting: str):
        """The metadata for the `meeting-ended` of `meeting`, which moves to the ended list."""
        if meeting in self.open:
            metadata = self.open.pop(meeting)
            self.ended.append((meeting, metadata))
            return metadata
        for known, metadata in self.ended:
            if known == meeting:
                return metadata
        return None

    def get(self, meeting: str):
        return self.open.get(meeting)


MEETINGS = Meetings()


def meeting_object(document):
    """`data.attributes.meeting` of a processed event, when it is an object."""
    node = document
    for key in ("data", "attributes", "meeting"):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, dict) else None


def parse_max_meetings(raw):
    if raw is None:
        return DEFAULT_MAX_MEETINGS
    digits = raw.strip().removeprefix("+")
    if digits.isascii() and digits.isdigit() and int(digits) > 0:
        return int(digits)
    raise Err(
        f"meeting-metadata: `max_meetings` must be a positive integer, not {json.dumps(raw)}"
    )


class WitWorld(wit_world.WitWorld):
    def init(self) -> list[str]:
        MEETINGS.max_meetings = parse_max_meetings(host.get_config("max_meetings"))
        # Every event: any event of a known meeting may get the metadata.
        return []

    def on_event(self, event: Event, hook: Hook):
        if event.id == "meeting-created":
            try:
                created = json.loads(event.processed)
            except ValueError:
                host.log(Level.WARN, "meeting-metadata: meeting-created is not valid JSON")
                return Action_Keep()
            meeting = meeting_object(created)
            if meeting is None:
                return Action_Keep()
            meeting_id = event.internal_meeting_id
            if meeting_id is None and isinstance(meeting.get("internal-meeting-id"), str):
                meeting_id = meeting["internal-meeting-id"]
            metadata = meeting.get("metadata")
            if meeting_id is not None and isinstance(metadata, dict):
                MEETINGS.remember(meeting_id, metadata)
            # The event carries the metadata already.
            return Action_Keep()

        meeting_id = event.internal_meeting_id
        if meeting_id is None:
            return Action_Keep()
        if event.id == "meeting-ended":
            metadata = MEETINGS.end(meeting_id)
        else:
            metadata = MEETINGS.get(meeting_id)
        if metadata is None or hook.get_raw:
            return Action_Keep()

        try:
            document = json.loads(event.processed)
        except ValueError:
            host.log(Level.WARN, f"meeting-metadata: {event.id} is not valid JSON; left as is")
            return Action_Keep()
        meeting = meeting_object(document)
        if meeting is None or "metadata" in meeting:
            return Action_Keep()
        meeting["metadata"] = metadata
        return Action_Replace(json.dumps(document, ensure_ascii=False, separators=(",", ":")))

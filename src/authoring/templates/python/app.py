"""{{name}}: a hookrelay plugin written in Python.

Build it with `hookrelay plugin build` (which installs the pinned componentize-py), or by
hand from this folder:

    componentize-py --wit-path wit --world plugin componentize app -o build/{{name}}.wasm

The relay calls `init` once per instance, then `on_event` for every (event, hook) pair in
the plugin's scope. Edit the two methods of `WitWorld` below; the rest is plumbing.
"""

import json

import wit_world
from componentize_py_types import Err  # raise Err("why") in init to refuse to load
from wit_world.imports import host
from wit_world.imports.types import (
    Action_Drop,
    Action_Keep,
    Action_Replace,
    Event,
    Hook,
    Level,
)

# Settings from the [config] table of {{name}}.toml, read once by `init`.
# get-config gives strings as they are and other TOML values as JSON text,
# so `keep_chat = true` comes back as the string "true".
KEEP_CHAT = False
SITE = None


class WitWorld(wit_world.WitWorld):
    def init(self) -> list[str]:
        global KEEP_CHAT, SITE
        KEEP_CHAT = (host.get_config("keep_chat") or "").strip() == "true"
        SITE = host.get_config("site")
        # To reject the plugin (e.g. a missing or wrong setting): raise Err("why").
        host.log(Level.INFO, "{{name}} ready")
        # The event ids this plugin wants; every other event passes it untouched.
        # Return [] to see every event (slower: every event then costs a call).
        return ["user-joined", "chat-group-message-sent"]

    def on_event(self, event: Event, hook: Hook):
        # Return Action_Keep(), Action_Drop() or Action_Replace(json_text).
        if event.id == "chat-group-message-sent":
            return Action_Keep() if KEEP_CHAT else Action_Drop()

        # A hook that asked for raw events gets the bus message (event.raw);
        # the others get the processed event.
        payload = event.raw if hook.get_raw else event.processed
        try:
            document = json.loads(payload)
        except ValueError:
            return Action_Keep()

        # Only processed events have data.attributes; raw messages are left as they are.
        if hook.get_raw or SITE is None:
            return Action_Keep()
        attributes = document.get("data", {}) if isinstance(document, dict) else None
        attributes = attributes.get("attributes") if isinstance(attributes, dict) else None
        if not isinstance(attributes, dict):
            return Action_Keep()
        attributes["site"] = SITE
        # Compact JSON, non-ASCII characters kept as they are; key order is preserved.
        return Action_Replace(json.dumps(document, ensure_ascii=False, separators=(",", ":")))

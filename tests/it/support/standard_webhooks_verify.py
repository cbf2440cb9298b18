"""Checks one callback with the official Standard Webhooks Python library (PyPI
standardwebhooks 1.1.0, installed by scripts/ensure-standard-webhooks.sh), for the tests that
sign callbacks.

Reads one JSON object from stdin: {"secret": "whsec_...", "headers": {"webhook-id": ...,
"webhook-timestamp": ..., "webhook-signature": ...}, "body": "<raw body text>"}, and prints one
line: {"ok": true, "event": <what verify returned>} or {"ok": false, "error": "<Class: message>"}.
Exits 0 either way, 2 when the input is not such an object.
"""

import json
import sys

from standardwebhooks import Webhook

try:
    request = json.load(sys.stdin)
    secret, headers, body = request["secret"], request["headers"], request["body"]
    assert isinstance(secret, str) and isinstance(headers, dict) and isinstance(body, str)
except Exception as e:
    print(f"bad input: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(2)

try:
    result = {"ok": True, "event": Webhook(secret).verify(body, headers)}
except Exception as e:
    result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
print(json.dumps(result))

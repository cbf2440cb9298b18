// Checks one callback with the official Standard Webhooks JavaScript library (npm
// standardwebhooks 1.1.1), for the tests that sign callbacks. scripts/ensure-standard-webhooks.sh
// installs it in the user's cache ($XDG_CACHE_HOME or ~/.cache, hookrelay/npm-standardwebhooks;
// or $STANDARDWEBHOOKS_NPM), and this loads it from there: ES module imports ignore NODE_PATH,
// so it is required by path.
//
// Reads one JSON object from stdin: {"secret": "whsec_...", "headers": {"webhook-id": ...,
// "webhook-timestamp": ..., "webhook-signature": ...}, "body": "<raw body text>"}, and prints one
// line: {"ok": true, "event": <what verify returned>} or {"ok": false, "error": "<Class: message>"}.
// Exits 0 either way, 2 when the input is not such an object.
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

const cache = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
const dir = process.env.STANDARDWEBHOOKS_NPM || join(cache, "hookrelay", "npm-standardwebhooks");
const { Webhook } = createRequire(resolve(dir, "package.json"))("standardwebhooks");

let input = "";
for await (const chunk of process.stdin) input += chunk;
let secret, headers, body;
try {
  ({ secret, headers, body } = JSON.parse(input));
  if (typeof secret !== "string" || typeof body !== "string" || typeof headers !== "object" || !headers)
    throw new Error("expected {secret, headers, body}");
} catch (e) {
  console.error(`bad input: ${e.name}: ${e.message}`);
  process.exit(2);
}

let result;
try {
  // verify returns undefined for an empty body; JSON has no undefined, so that is null here.
  result = { ok: true, event: new Webhook(secret).verify(body, headers) ?? null };
} catch (e) {
  result = { ok: false, error: `${e.name}: ${e.message}` };
}
console.log(JSON.stringify(result));

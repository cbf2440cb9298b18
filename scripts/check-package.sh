#!/usr/bin/env bash
# Builds the Debian package from the test build's binary (cargo-deb, installed from crates.io
# if missing), checks its contents with dpkg-deb, and, when run as root on a machine with dpkg,
# installs it, runs the installed service's command as its user against a private
# redis-server, then purges it. Prints "package: ok" or fails.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  echo "package: installing cargo-deb $CARGO_DEB_VERSION from crates.io"
  cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi
# The test build (cargo test) made target/debug/hookrelay; scripts/package.sh makes a release.
# The test build's features (its examples pull in the dev-dependencies): nothing rebuilt after scripts/test.sh.
cargo build --quiet --bins --examples
scripts/build-plugins.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo deb --quiet --no-build --profile dev --no-strip --fast -o "$out/"
deb=$(ls "$out"/hookrelay_*.deb)

fail() { echo "package: $*" >&2; exit 1; }
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/hookrelay ./etc/hookrelay/hookrelay.toml ./etc/bigbluebutton/nginx/hookrelay.nginx \
         ./usr/lib/systemd/system/hookrelay.service ./usr/share/doc/hookrelay/README.md \
         ./usr/share/doc/hookrelay/docs/install.md ./usr/share/doc/hookrelay/docs/reliability.md \
         ./usr/share/hookrelay/grafana/hookrelay.json ./usr/share/doc/hookrelay/docs/admin.md; do
  grep -q " $f\$" <<<"$contents" || fail "$f missing"
done
grep -q -- '-rw-r----- .* ./etc/hookrelay/hookrelay.toml$' <<<"$contents" \
  || fail "the configuration is not 640"
dpkg-deb -e "$deb" "$out/control"
grep -qx /etc/hookrelay/hookrelay.toml "$out/control/conffiles" || fail "configuration is not a conffile"
grep -qx /etc/bigbluebutton/nginx/hookrelay.nginx "$out/control/conffiles" || fail "the nginx location is not a conffile"
grep -q '^Depends: .*adduser' "$out/control/control" || fail "adduser not a dependency"
grep -q 'adduser --system' "$out/control/postinst" || fail "postinst makes no user"
grep -q 'deb-systemd-helper' "$out/control/postinst" || fail "postinst does not enable the unit"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$out" ./usr/lib/systemd/system/hookrelay.service
unit="$out/usr/lib/systemd/system/hookrelay.service"
for line in 'Type=notify' 'Restart=always' 'User=hookrelay' 'ProtectSystem=strict' \
            'NoNewPrivileges=yes' 'PartOf=bigbluebutton.target' 'StartLimitIntervalSec=0' \
            'After=network.target redis-server.service' \
            'WantedBy=multi-user.target bigbluebutton.target' \
            'EnvironmentFile=/etc/hookrelay/secret.env' 'LimitCORE=0' 'PrivateIPC=yes' \
            'RemoveIPC=yes' 'SocketBindDeny=any' 'SocketBindAllow=tcp:3005' 'RuntimeDirectory=hookrelay' \
            'ExecStart=/usr/bin/hookrelay serve --config /etc/hookrelay/hookrelay.toml'; do
  grep -qx "$line" "$unit" || fail "the unit lacks $line"
done
grep -q '^InaccessiblePaths=.*-/var/bigbluebutton' "$unit" || fail "the unit can read the recordings"
# systemd's own measure of the unit's exposure (docs/security.md gives it): 1.4 when written.
if systemd-analyze security --offline=yes "$unit" >"$out/security.txt" 2>&1; then
  score=$(sed -n 's/.*Overall exposure level for hookrelay.service: \([0-9.]*\).*/\1/p' "$out/security.txt")
  awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 1.5) }' \
    || { cat "$out/security.txt"; fail "systemd-analyze security: exposure ${score:-unknown}, above 1.5"; }
  echo "package: systemd-analyze security: exposure $score"
fi
for p in event-filter meeting-metadata redact rules slack-format; do
  for f in "$p.wasm" "$p.toml" "$p.md"; do
    grep -q " ./usr/share/hookrelay/plugins/$f\$" <<<"$contents" || fail "plugin file $f missing"
  done
done
grep -q " ./usr/share/doc/hookrelay/plugins/README.md\$" <<<"$contents" || fail "the plugin guide is missing"
# Every event's JSON Schema, as docs/schemas/ holds them (what `hookrelay events schema` prints),
# owned by root (0/0), mode 0644.
for f in docs/schemas/*.json; do
  grep -q "^-rw-r--r-- 0/0 .* ./usr/share/hookrelay/schemas/$(basename "$f")\$" <<<"$contents" \
    || fail "schema $(basename "$f") missing, or not root's 0644"
done
echo "package: contents ok ($(basename "$deb"))"

# A plugin from the package, enabled as the README says (a link to its .wasm and a copy of its
# NAME.toml in a plugin folder), loads in the packaged binary and acts on an event.
mkdir "$out/root" "$out/enabled"
dpkg-deb -x "$deb" "$out/root"
ln -s "$out/root/usr/share/hookrelay/plugins/redact.wasm" "$out/enabled/10-redact.wasm"
cp "$out/root/usr/share/hookrelay/plugins/redact.toml" "$out/enabled/10-redact.toml"
"$out/root/usr/bin/hookrelay" replay src/plugin_host/sample-meeting.jsonl --plugins "$out/enabled" \
  >"$out/replay.txt" 2>"$out/replay.err" || { cat "$out/replay.err"; fail "replay with the packaged redact failed"; }
grep -q '"name":"\[redacted\]"' "$out/replay.txt" || { cat "$out/replay.txt"; fail "the packaged redact did not redact"; }
if grep -q '"name":"[^[]' "$out/replay.txt"; then fail "the packaged redact left a name"; fi
echo "package: the packaged redact plugin loads in the packaged binary and redacts names"
# The installed schemas are the ones the packaged binary prints.
"$out/root/usr/bin/hookrelay" events schema user-role-changed >"$out/schema.json"
cmp -s <(python3 -m json.tool "$out/schema.json") \
  <(python3 -m json.tool "$out/root/usr/share/hookrelay/schemas/user-role-changed.schema.json") \
  || fail "the packaged binary's schema of user-role-changed is not the installed one"
echo "package: the installed event schemas are the binary's"

# Installing starts the service where systemd runs, against the machine's own Redis: only on a
# machine without systemd (a container, as in CI).
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null || dpkg -s hookrelay >/dev/null 2>&1 \
   || [ -d /run/systemd/system ]; then
  echo "package: not installed here (needs root, dpkg, no systemd running and no hookrelay package installed)"
  echo "package: ok"
  exit 0
fi
# A BigBlueButton server's bbb-web properties (made here when the machine has none): the
# package takes the secret from them, and the relay BBB's API address.
made_props=""
if [ ! -e /etc/bigbluebutton/bbb-web.properties ]; then
  [ -d /etc/bigbluebutton ] || made_props="dir"
  [ -n "$made_props" ] || made_props="file"
  mkdir -p /etc/bigbluebutton
  printf 'securitySalt=pkgCheckSalt%s\nbigbluebutton.web.serverURL=https://bbb.package-check.example\n' \
    "$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" >/etc/bigbluebutton/bbb-web.properties
  chmod 644 /etc/bigbluebutton/bbb-web.properties
fi
dpkg -i "$deb" >"$out/install.log" 2>&1 || { cat "$out/install.log"; fail "dpkg -i failed"; }
cleanup() {
  case "$made_props" in
    dir) rm -rf /etc/bigbluebutton ;;
    file) rm -f /etc/bigbluebutton/bbb-web.properties ;;
  esac
  [ -n "${relay:-}" ] && kill "$relay" 2>/dev/null || true
  [ -n "${redis:-}" ] && kill "$redis" 2>/dev/null || true
  dpkg --purge hookrelay >/dev/null 2>&1 || true
  [ ! -e /etc/hookrelay/secret.env ] || echo "package: purge left /etc/hookrelay/secret.env" >&2
  rm -rf "$out"
}
trap cleanup EXIT
getent passwd hookrelay >/dev/null || fail "no hookrelay user"
[ "$(stat -c '%U:%G %a' /etc/hookrelay/hookrelay.toml)" = "root:hookrelay 640" ] \
  || fail "configuration owner or mode: $(stat -c '%U:%G %a' /etc/hookrelay/hookrelay.toml)"
[ "$(stat -c '%U:%G %a' /etc/hookrelay/secret.env)" = "root:hookrelay 640" ] \
  || fail "secret file owner or mode: $(stat -c '%U:%G %a' /etc/hookrelay/secret.env)"
grep -Eqx 'HOOKRELAY_BBB__SECRET=[A-Za-z0-9]+' /etc/hookrelay/secret.env || fail "no secret written"
cmp -s hookrelay.example.toml /etc/hookrelay/hookrelay.toml || fail "the conffile was edited"
# The secret comes from secret.env beside the configuration, for the service and for the
# commands run by hand alike.
runuser -u hookrelay -- /usr/bin/hookrelay check-config --config /etc/hookrelay/hookrelay.toml \
  >"$out/check.txt" || fail "the installed configuration does not load as the service user"
# BBB's API comes from bbb-web's serverURL, bbb-web on the host first.
server_url=$(sed -n 's/^bigbluebutton.web.serverURL=//p' /etc/bigbluebutton/bbb-web.properties | tail -n 1)
grep -qF "BBB API: http://127.0.0.1:8090/bigbluebutton/api (bbb-web on this host)" "$out/check.txt" \
  && grep -qF "else $server_url/bigbluebutton/api (bigbluebutton.web.serverURL of /etc/bigbluebutton/bbb-web.properties)" "$out/check.txt" \
  || { cat "$out/check.txt"; fail "check-config does not take BBB's API from bbb-web.properties"; }
if [ -n "$made_props" ]; then
  salt=$(sed -n 's/^securitySalt=//p' /etc/bigbluebutton/bbb-web.properties)
  grep -qx "HOOKRELAY_BBB__SECRET=$salt" /etc/hookrelay/secret.env || fail "the secret is not bbb-web's securitySalt"
fi
echo "package: check-config takes BBB's API from bbb-web.properties ($server_url)"
# BigBlueButton's nginx site (its /bigbluebutton location, and the *.nginx snippets it includes)
# with bbb-webhooks' own webhooks.nginx (BigBlueButton's build/packages-template/bbb-webhooks/,
# at a port where nothing answers) and the package's hookrelay.nginx (at the relay's test port):
# nginx accepts both, and the hooks API reaches the relay. Debian's nginx binary, unpacked here
# when the machine has none.
check_nginx() {
  local ngx="$out/nginx" bin nport dead ngxpid ok=""
  mkdir -p "$ngx/conf" "$ngx/logs" "$ngx/pkg"
  if command -v nginx >/dev/null; then
    bin=$(command -v nginx)
  else
    (cd "$ngx/pkg" && apt-get download nginx >/dev/null 2>&1 && dpkg -x nginx_*.deb x) \
      || fail "cannot get Debian's nginx to check the location"
    bin="$ngx/pkg/x/usr/sbin/nginx"
  fi
  nport=$(port); dead=$(port)
  sed "s/127.0.0.1:3005/127.0.0.1:$aport/" /etc/bigbluebutton/nginx/hookrelay.nginx >"$ngx/conf/hookrelay.nginx"
  printf 'location /bigbluebutton/api/hooks {\n    proxy_pass http://127.0.0.1:%s;\n}\n' "$dead" >"$ngx/conf/webhooks.nginx"
  cat >"$ngx/nginx.conf" <<EOF
daemon off;
master_process off;
error_log $ngx/logs/error.log;
pid $ngx/logs/nginx.pid;
events {}
http {
  access_log off;
  client_body_temp_path $ngx/logs/body;
  proxy_temp_path $ngx/logs/proxy;
  fastcgi_temp_path $ngx/logs/fastcgi;
  uwsgi_temp_path $ngx/logs/uwsgi;
  scgi_temp_path $ngx/logs/scgi;
  server {
    listen 127.0.0.1:$nport;
    location /bigbluebutton { return 404; }
    include $ngx/conf/*.nginx;
  }
}
EOF
  "$bin" -t -c "$ngx/nginx.conf" -p "$ngx" >"$ngx/t.log" 2>&1 || { cat "$ngx/t.log"; fail "nginx refuses hookrelay.nginx beside webhooks.nginx"; }
  "$bin" -c "$ngx/nginx.conf" -p "$ngx" >"$ngx/run.log" 2>&1 &
  ngxpid=$!
  for _ in $(seq 1 50); do
    if curl -fsS "http://127.0.0.1:$nport/bigbluebutton/api/hooks/ping" 2>/dev/null | grep -q 'API up'; then ok=1; break; fi
    sleep 0.1
  done
  kill "$ngxpid" 2>/dev/null || true
  [ -n "$ok" ] || { cat "$ngx/run.log" "$ngx/logs/error.log" 2>/dev/null; fail "the hooks API does not reach the relay through nginx"; }
}

# The unit's command, as its user, with a private Redis and free ports (never the machine's).
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rport=$(port); aport=$(port); mport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis=$!
HOOKRELAY_REDIS__URL="redis://127.0.0.1:$rport" HOOKRELAY_API__BIND="127.0.0.1:$aport" \
  HOOKRELAY_METRICS__BIND="127.0.0.1:$mport" \
  runuser -u hookrelay -- /usr/bin/hookrelay serve --config /etc/hookrelay/hookrelay.toml \
  >"$out/serve.log" 2>&1 &
relay=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$aport/bigbluebutton/api/hooks/ping" 2>/dev/null | grep -q 'API up'; then
    echo "package: installed, and its service answers as user hookrelay"
    /usr/bin/hookrelay hooks --config /etc/hookrelay/hookrelay.toml \
      --api-url "http://127.0.0.1:$aport/bigbluebutton/api" list >"$out/list.txt" 2>&1 \
      || { cat "$out/list.txt"; fail "hookrelay hooks list was refused by the installed service"; }
    echo "package: hookrelay hooks list answers with the installed secret"
    # Without --config, the commands read the package's configuration and its secret.env.
    /usr/bin/hookrelay hooks --api-url "http://127.0.0.1:$aport/bigbluebutton/api" list \
      >"$out/list2.txt" 2>&1 || { cat "$out/list2.txt"; fail "hookrelay hooks list without -c was refused"; }
    # A user outside group hookrelay is told why, not "not found".
    if runuser -u nobody -- /usr/bin/hookrelay hooks list >"$out/nobody.txt" 2>&1; then
      fail "user nobody read the configuration"
    fi
    grep -q "permission denied" "$out/nobody.txt" || { cat "$out/nobody.txt"; fail "nobody was not told permission denied"; }
    echo "package: the commands read /etc/hookrelay without -c, and say permission denied to others"
    check_nginx
    echo "package: BigBlueButton's nginx sends the hooks API to the relay, beside bbb-webhooks' location"
    if command -v systemd-analyze >/dev/null; then
      systemd-analyze verify /usr/lib/systemd/system/hookrelay.service >"$out/verify.txt" 2>&1 || true
      # Units it names that this machine lacks (BigBlueButton's target) are not the unit's fault.
      if grep -v -e 'bigbluebutton.target' -e 'redis-server.service' "$out/verify.txt" | grep -q .; then
        cat "$out/verify.txt"
        fail "systemd-analyze verify found problems in the unit"
      fi
      echo "package: systemd-analyze verify accepts the unit"
    fi
    echo "package: ok"
    exit 0
  fi
  sleep 0.2
done
cat "$out/serve.log"
fail "the installed service did not answer"

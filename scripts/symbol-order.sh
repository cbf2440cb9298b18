#!/usr/bin/env bash
# Regenerates link/hot-symbols.txt, the order in which the release binary's linker places its
# functions (build.rs): builds the release relay and the load tool, runs two `load burst`
# scenarios and a `load idle` with the relay under callgrind (valgrind, from Debian's packages),
# and lists the functions that ran once the relay was ready, hottest first, then those only its
# start and stop ran (scripts/symbol_order.py). Takes a few minutes after the build. Run it
# after a change of dependencies or of the hot path; `--check` only says how many of the file's
# functions the last release build (or BINARY) has, and fails below nine in ten.
#   scripts/symbol-order.sh [--check [BINARY]]
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
bin=$target_dir/release/hookrelay
order=link/hot-symbols.txt

coverage() {
  [ -x "$bin" ] || { echo "symbol-order: $bin is missing: cargo build --release first" >&2; exit 1; }
  local names wanted found
  # Names compared without ThinLTO's `.llvm.<number>` (build.rs matches those by pattern).
  local strip='s/\.llvm\.[0-9]*$//'
  names=$(grep -v '^#' "$order" | sed "$strip" | sort -u)
  wanted=$(wc -l <<< "$names")
  found=$(comm -12 <(echo "$names") <(nm --defined-only "$bin" | awk '{print $3}' | sed "$strip" | sort -u) | wc -l)
  echo "symbol-order: $found of the $wanted functions of $order are in $bin"
  if [ $((found * 10)) -lt $((wanted * 9)) ]; then
    echo "symbol-order: fewer than nine in ten: a relay built in one cargo build with the tests or" >&2
    echo "  the load tool is another binary (build it alone: cargo build --release --bin hookrelay);" >&2
    echo "  otherwise run scripts/symbol-order.sh to regenerate the list" >&2
    return 1
  fi
}
if [ "${1:-}" = "--check" ]; then
  bin=${2:-$bin}
  coverage
  exit
fi

command -v valgrind >/dev/null 2>&1 || scripts/apt-install.sh valgrind
scripts/ensure-redis.sh
cargo build --release --quiet --example load
# The relay profiled is linked without the list: valgrind names only the functions of `.text`,
# and those the list's patterns put in `.text.hot` would be left out of the next list. The
# functions' names are the same either way. (Built alone: with the load tool in the same cargo
# build, the dependencies' features, and so the names' hashes, would be those of another binary.)
HOOKRELAY_SYMBOL_ORDER=0 cargo build --release --quiet --bin hookrelay
work=$(mktemp -d)
# SYMBOL_ORDER_KEEP=1 keeps the profiles and logs (the folder is printed).
if [ -n "${SYMBOL_ORDER_KEEP:-}" ]; then echo "symbol-order: profiles in $work"; else trap 'rm -rf "$work"' EXIT; fi
cp "$bin" "$work/hookrelay"
# The load tool ends each run with SIGKILL, which leaves callgrind nothing written: the relay
# runs as a child of a shell the tool kills instead. Each profile comes in three parts: its start
# (dumped once the ready relay has given back its start's pages, `binary_pages::give_back`), its
# running (dumped as soon as the tool has killed the shell), and its stop (SIGTERM, a clean stop,
# whose exit writes the last part). symbol_order.py puts the running part's functions first.
cat > "$work/relay.sh" <<WRAP
#!/usr/bin/env bash
valgrind --tool=callgrind --demangle=no --callgrind-out-file=$work/profile.%p \
  '--dump-after=*binary_pages*give_back*' \
  --log-file=$work/valgrind.%p.log "$work/hookrelay" "\$@" &
relay=\$!
echo \$relay >> $work/pids
shell=\$\$
( while kill -0 \$shell 2>/dev/null; do sleep 0.1; done
  callgrind_control --dump \$relay > /dev/null 2>&1
  kill -TERM \$relay 2>/dev/null ) < /dev/null > /dev/null 2>&1 &
wait \$relay
WRAP
chmod +x "$work/relay.sh"
load=$target_dir/release/examples/load
"$load" burst --events 2000 --hooks 10 --relay-bin "$work/relay.sh" > "$work/load.log" 2>&1 </dev/null || true
"$load" burst --events 2000 --hooks 1 --relay-bin "$work/relay.sh" >> "$work/load.log" 2>&1 </dev/null || true
"$load" idle --seconds 20 --hooks 10 --relay-bin "$work/relay.sh" >> "$work/load.log" 2>&1 </dev/null || true
while read -r pid; do
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
done < "$work/pids"
# Each relay's profile: its start, its running and its stop.
if [ "$(grep -c 'checks=ok' "$work/load.log")" -ne 3 ] || [ "$(find "$work" -name 'profile.*' -size +0 | wc -l)" -ne 9 ]; then
  cat "$work/load.log" >&2
  echo "symbol-order: a load run failed, or its relay wrote no profile in three parts" >&2
  exit 1
fi

python3 scripts/symbol_order.py "$order" /hookrelay "$work"/profile.*
cargo build --release --quiet --bin hookrelay
coverage

# Helpers of the packaging tests: failures name what was expected; every wait has a deadline.
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# wait_for SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds, or fails after SECONDS.
wait_for() {
  local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s%N)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# The port an `islet serve` logged when it started listening (its log is JSON lines on stderr).
listening_port() { grep '"listening"' "$1" | grep -o '"port":[0-9]*' | head -1 | cut -d: -f2; }

#!/usr/bin/env bash
# The Debian package as an operator meets it: `make deb`, `dpkg -i`, the packaged binary started the way
# the packaged unit starts it (its user, working directory, environment file and command), used, stopped
# with SIGTERM, then `dpkg --purge` leaves nothing behind. Needs root (or sudo): it installs a package.
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Packaging/lib.sh

dpkg-query -W -f='${Status}' islet 2>/dev/null | grep -q "install ok installed" && fail "islet is already installed here; this test installs and purges it"
make --no-print-directory -s deb > "${TMPDIR:-/tmp}/islet-make-deb.log" 2>&1 || fail "make deb failed: $(tail -20 "${TMPDIR:-/tmp}/islet-make-deb.log")"
grep -q "warning:" "${TMPDIR:-/tmp}/islet-make-deb.log" && fail "the release build warns: $(grep "warning:" "${TMPDIR:-/tmp}/islet-make-deb.log" | head -3)"
deb="$(tail -1 "${TMPDIR:-/tmp}/islet-make-deb.log")"
[ -f "$deb" ] || fail "make deb printed no package: $deb"
ok "built $deb"
info="$(dpkg-deb --info "$deb")"
grep -q "Depends:.*libmicrohttpd12" <<<"$info" || fail "Depends lacks libmicrohttpd12: $info"
contents="$(dpkg-deb --contents "$deb")"   # whole first: under pipefail, `| grep -q` can fail on SIGPIPE
grep -q "/opt/swift" <<<"$contents" && fail "the package refers to the toolchain"

cleanup() { as_root dpkg --purge islet >/dev/null 2>&1 || true; rm -rf "$work"; }
work="$(mktemp -d)"; trap cleanup EXIT
chmod 755 "$work"
as_root dpkg -i "$deb" >/dev/null
ok "dpkg -i"

unit=/lib/systemd/system/islet.service
[ -x /usr/bin/islet ] || fail "no /usr/bin/islet"
[ -f "$unit" ] || fail "no $unit"
cmp -s "$unit" packaging/islet.service || fail "the installed unit differs from packaging/islet.service"
getent passwd islet | grep -q ":/usr/sbin/nologin$" || fail "no islet system user with a nologin shell"
[ "$(stat -c '%U %a' /var/lib/islet)" = "islet 700" ] || fail "/var/lib/islet is $(stat -c '%U %a' /var/lib/islet), not islet 700"
[ "$(stat -c '%U:%G %a' /etc/islet)" = "root:islet 750" ] || fail "/etc/islet is $(stat -c '%U:%G %a' /etc/islet)"
[ "$(stat -c '%U:%G %a' /etc/islet/islet.env)" = "root:islet 640" ] || fail "/etc/islet/islet.env is $(stat -c '%U:%G %a' /etc/islet/islet.env)"
[ "$(stat -c '%U %a' /etc/islet/master.key)" = "islet 600" ] || fail "/etc/islet/master.key is $(stat -c '%U %a' /etc/islet/master.key)"
[ "$(tr -d '\n' < /etc/islet/master.key | wc -c)" = "64" ] || fail "the master key is not 64 hex digits"
for doc in README.md API.md PRODUCTION.md CONSOLE.md ARCHITECTURE.md; do
  [ -f "/usr/share/doc/islet/$doc" ] || fail "no /usr/share/doc/islet/$doc (README links to it)"
done
page="$(zcat /usr/share/man/man1/islet.1.gz)"
grep -q '^\.TH ISLET 1' <<<"${page%%$'\n'*}" || fail "no man page"
if command -v man >/dev/null; then
  rendered="$(man -l /usr/share/man/man1/islet.1.gz 2>/dev/null)"
  grep -q "islet db backup" <<<"$rendered" || fail "the man page lacks islet db backup"
fi
ok "files, user, permissions, docs and man page in place"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$unit" 2>"$work/verify.txt" || true
  grep -v -e "not running" -e "Failed to connect" -e "Cannot find" -e "^$" "$work/verify.txt" | grep -i "islet.service" && fail "systemd-analyze verify: $(cat "$work/verify.txt")"
  ok "systemd-analyze verify finds nothing wrong with the unit"
fi

# Start it as the unit does: User=, WorkingDirectory=, EnvironmentFile=, ExecStart=. Only the port
# differs (0: any free one), so the test cannot collide with a server already on 8080.
user="$(sed -n 's/^User=//p' "$unit")"; directory="$(sed -n 's/^WorkingDirectory=//p' "$unit")"
envfile="$(sed -n 's/^EnvironmentFile=//p' "$unit")"; command="$(sed -n 's/^ExecStart=//p' "$unit")"
mapfile -t settings < <(grep -v -e '^#' -e '^$' "$envfile")
as_root bash -c "cd '$directory' && umask 0077 && exec runuser -u '$user' -- env ${settings[*]} ISLET_LISTEN=127.0.0.1:0 $command" 2>"$work/islet.log" &
server=$!
wait_for 20 listening_port "$work/islet.log" || fail "the packaged server did not start: $(cat "$work/islet.log")"
port="$(listening_port "$work/islet.log")"
wait_for 10 curl -sf "http://127.0.0.1:$port/healthz" || fail "no /healthz on $port"
grep -q '"apns":"apple"' "$work/islet.log" || fail "the packaged config (ISLET_APNS=apple) was not used: $(head -3 "$work/islet.log")"
ok "the packaged server runs as $user on port $port"

# An operator's first steps: an application with its APNs key (as the service user, on the service's
# database), then the API. The key is sealed with the packaged master key: not in the file in clear.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/AuthKey_ABC123DEFG.p8" 2>/dev/null
as_root chown islet "$work/AuthKey_ABC123DEFG.p8"; as_root chmod 600 "$work/AuthKey_ABC123DEFG.p8"
# As docs/PRODUCTION.md runs admin commands: as islet, with the service's settings sourced.
created="$(as_root runuser -u islet -- sh -c "set -a; . /etc/islet/islet.env; exec islet app create --name Shop --bundle-id com.example.shop \
  --team-id DEF123GHIJ --key-id ABC123DEFG --key-file $work/AuthKey_ABC123DEFG.p8 --json")"
as_root grep -q "PRIVATE KEY" /var/lib/islet/islet.sqlite* && fail "the APNs key is stored in clear"
as_root grep -q "islet-sealed:v2:" /var/lib/islet/islet.sqlite* || fail "the APNs key is not sealed"
code="$(grep -o '"application":"[^"]*"' <<<"$created" | cut -d'"' -f4)"; token="$(grep -o '"api_token":"[^"]*"' <<<"$created" | cut -d'"' -f4)"
answer="$(curl -s "http://127.0.0.1:$port/json/1.3/getApplication" -d "{\"request\":{\"application\":\"$code\",\"auth\":\"$token\"}}")"
grep -q '"bundle_id":"com.example.shop"' <<<"$answer" || fail "getApplication: $answer"
grep -q '"key_id":"ABC123DEFG"' <<<"$answer" || fail "getApplication does not show the key: $answer"
[ "$(stat -c '%U %a' /var/lib/islet/islet.sqlite)" = "islet 600" ] || fail "the database is $(stat -c '%U %a' /var/lib/islet/islet.sqlite)"
as_root runuser -u islet -- sh -c 'set -a; . /etc/islet/islet.env; exec islet db backup /var/lib/islet/backup.sqlite' >/dev/null
[ "$(stat -c '%U %a' /var/lib/islet/backup.sqlite)" = "islet 600" ] || fail "the backup is $(stat -c '%U %a' /var/lib/islet/backup.sqlite)"
as_root runuser -u islet -- /usr/bin/islet app list --database /var/lib/islet/backup.sqlite | grep -q "com.example.shop" || fail "the backup lacks the application"
ok "app create, getApplication, islet db backup (0600) on the packaged database"

started=$(date +%s%N)
as_root pkill -TERM -u islet -x islet   # only the packaged server runs as the islet user
wait_for 15 bash -c "! kill -0 $server" || fail "the server did not stop within 15 s of SIGTERM"
wait "$server" || fail "the server exited with status $? after SIGTERM"
ok "SIGTERM: stopped with status 0 in $(( ($(date +%s%N) - started) / 1000000 )) ms"

as_root dpkg --purge islet >/dev/null
for gone in /usr/bin/islet "$unit" /etc/islet /var/lib/islet /usr/share/man/man1/islet.1.gz /etc/islet/master.key; do
  [ ! -e "$gone" ] || fail "$gone is still there after dpkg --purge"
done
getent passwd islet >/dev/null && fail "the islet user is still there after dpkg --purge"
ok "dpkg --purge removed the files, the data and the user"

#!/usr/bin/env bash
# docs/PRODUCTION.md's TLS set-up, run: Debian's nginx with packaging/nginx-islet.conf (only its ports,
# certificate paths and upstream swapped for the test's) in front of `islet serve`, reached over HTTPS
# by curl, which verifies the certificate and the server name.
# usage: Tests/Packaging/test-nginx-proxy.sh [ISLET_BINARY]   (default: .build/debug/islet)
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Packaging/lib.sh
islet="${1:-.build/debug/islet}"
[ -x "$islet" ] || fail "no islet binary at $islet (swift build first)"
[ -x /usr/sbin/nginx ] || fail "nginx is missing: scripts/install-deps --test installs nginx-light"

work="$(mktemp -d)"
pids=()
# SIGTERM, not SIGKILL: nginx's master takes its workers with it only when it is allowed to.
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait_for 10 bash -c "! kill -0 $pid" || kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Islet as `make run` starts it: the simulator, a fresh database, the demo application.
"$islet" serve --listen 127.0.0.1:0 --database "$work/islet.sqlite" --apns simulator >/dev/null 2>"$work/islet.log" &
pids+=($!)
wait_for 20 listening_port "$work/islet.log" || fail "islet did not start: $(cat "$work/islet.log")"
islet_port="$(listening_port "$work/islet.log")"

# A certificate for the example's server name, as certbot would provide.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=islet.example.com" \
  -addext "subjectAltName=DNS:islet.example.com" -keyout "$work/privkey.pem" -out "$work/fullchain.pem" 2>/dev/null
tls_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
sed -e "s|listen 443 ssl http2;|listen 127.0.0.1:$tls_port ssl http2;|" -e "/listen \[::\]:443/d" \
    -e "s|/etc/letsencrypt/live/islet.example.com|$work|g" -e "s|127.0.0.1:8080|127.0.0.1:$islet_port|g" \
    packaging/nginx-islet.conf > "$work/islet-site.conf"
grep -q "127.0.0.1:$tls_port" "$work/islet-site.conf" && grep -q "127.0.0.1:$islet_port" "$work/islet-site.conf" \
  || fail "packaging/nginx-islet.conf no longer has the lines this test swaps"
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work/body; proxy_temp_path $work/proxy; fastcgi_temp_path $work/fastcgi;
    uwsgi_temp_path $work/uwsgi; scgi_temp_path $work/scgi;
    include $work/islet-site.conf;
}
CONF
/usr/sbin/nginx -c "$work/nginx.conf" -e "$work/nginx-error.log" &
pids+=($!)
https() { curl -s --cacert "$work/fullchain.pem" --resolve "islet.example.com:$tls_port:127.0.0.1" "$@"; }
wait_for 10 https -o /dev/null "https://islet.example.com:$tls_port/healthz" || fail "nginx did not come up: $(cat "$work/nginx-error.log")"

answer="$(https "https://islet.example.com:$tls_port/json/1.3/getApplication" -d '{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}')"
grep -q '"status_code":200' <<<"$answer" || fail "getApplication through nginx: $answer"
ok "HTTPS through nginx reaches the API (certificate and name verified)"
[ "$(https -o /dev/null -w '%{http_version}' "https://islet.example.com:$tls_port/healthz")" = "2" ] || fail "nginx did not speak HTTP/2"
ok "HTTP/2 to nginx"
[ "$(https -o /dev/null -w '%{http_code}' "https://islet.example.com:$tls_port/simulator/devices")" = "403" ] || fail "/simulator/ is not refused"
ok "/simulator/ refused by the proxy"
# Read whole, then searched: `curl | grep -q` under pipefail fails when grep stops reading early (SIGPIPE).
metrics="$(https "https://islet.example.com:$tls_port/metrics")"
grep -q '^islet_http_requests_total' <<<"$metrics" || fail "/metrics not served to loopback"
ok "/metrics served to this machine"
# A 1.5 MiB body is refused at the proxy with the 413 answer Islet itself gives, in the JSON envelope.
head -c 1572864 /dev/zero | tr '\0' ' ' > "$work/big.json"
big="$(https "https://islet.example.com:$tls_port/json/1.3/getApplication" --data-binary "@$work/big.json")"
direct="$(curl -s "http://127.0.0.1:$islet_port/json/1.3/getApplication" --data-binary "@$work/big.json")"
[ "$big" = "$direct" ] || fail "an oversized body through nginx got: $big; Islet itself answers: $direct"
ok "bodies over 1 MiB get the same 413 envelope through nginx as from Islet"
plain="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$tls_port/healthz" || true)"
[ "$plain" = "400" ] || fail "plain HTTP on the TLS port got $plain, not nginx's 400 refusal"
ok "plain HTTP on the TLS port is refused (400), never passed to Islet"

# The console through the proxy: its cookie is Secure (nginx says X-Forwarded-Proto https), and its event
# stream reaches the browser through nginx as events happen, not when nginx's buffer fills.
headers="$(https -D - -o /dev/null -c "$work/cookies" -H 'Content-Type: application/json' "https://islet.example.com:$tls_port/console/api/session" -d '{"token":"SECRET_API_TOKEN"}')"
grep -qi '^set-cookie: islet_console=.*; HttpOnly; SameSite=Strict; Secure' <<<"$headers" || fail "the console's cookie through nginx: $headers"
ok "the console's session cookie is Secure behind the HTTPS proxy"
https -N -b "$work/cookies" --max-time 20 "https://islet.example.com:$tls_port/console/api/events" > "$work/events.txt" &
events_pid=$!
wait_for 10 grep -q "event: ready" "$work/events.txt" || fail "no ready event through nginx: $(cat "$work/events.txt")"
start='{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"content":"x","live_activity_id":"PROXY_1",
  "live_activity":{"event":"start","content-state":{"status":"ok"},"attributes-type":"FoodDeliveryAttributes","attributes":{}},"filter":"FILTER_NAME_1"}]}}'
started="$(https "https://islet.example.com:$tls_port/json/1.3/startLiveActivity" -d "$start")"
grep -q '"status_code":200' <<<"$started" || fail "startLiveActivity through nginx: $started"
wait_for 10 grep -q "event: change" "$work/events.txt" || fail "no change event through nginx: $(cat "$work/events.txt")"
kill "$events_pid" 2>/dev/null || true
ok "the console's Server-Sent Events pass through nginx as they happen"

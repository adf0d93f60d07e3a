#!/bin/bash
# Makes in-flight-v22.sqlite, or with --postgresql in-flight-v22.postgresql.sql (a pg_dump of schema `fixture`): a
# database left by Islet at schema version 22 (commit 75abecd, before issue 43's
# migration 23) killed with kill -9 in the middle of its work, for MigrationInFlightTests. Run it with that
# commit's islet-test-server:   make-in-flight-v22.sh /path/to/75abecd/.build/debug/islet-test-server [--postgresql]
# What it leaves in flight:
# - a start by filter to 120 phones, killed a third of the way through its fan-out (claimed, under a lease);
# - three live activities (LIVE_0..2), each started on one named phone that reported its update token, with an
#   update held for later (send_date a minute or two ahead: scheduled_updates) and one more accepted just before the kill.
set -euo pipefail
SERVER="$1"; ENGINE="${2:-}"; HERE="$(cd "$(dirname "$0")" && pwd)"
D="$(mktemp -d)"; chmod 755 "$D"; PG=""; PID=""; trap 'kill -9 $PID 2>/dev/null || true; [ -n "$PG" ] && runuser -u postgres -- $PG/pg_ctl -D "$D/pg" stop -m immediate >/dev/null; rm -rf "$D"' EXIT
DATABASE="$D/islet.sqlite"
if [ "$ENGINE" = --postgresql ]; then
  # A throwaway cluster on a Unix socket in $D, the database in schema `fixture`, as the tests keep theirs.
  PG="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"; S="$D/socket"; mkdir "$D/pg" "$S" && chown postgres "$D/pg" "$S"
  runuser -u postgres -- $PG/initdb -D "$D/pg" -A trust -U postgres >/dev/null
  runuser -u postgres -- $PG/pg_ctl -D "$D/pg" -o "-k $S -c listen_addresses=''" -l "$S/pg.log" start >/dev/null
  $PG/psql -X -q -h "$S" -U postgres -d postgres -c 'CREATE SCHEMA fixture'
  DATABASE="postgresql:///postgres?host=$S&user=postgres&options=-csearch_path%3Dfixture"
fi
cd "$D"   # the server's ./var (its audit log) stays in the temporary folder
"$SERVER" --database "$DATABASE" --record "$D/pushes.jsonl" --batch-size 10 --batch-delay-ms 150 --workers 1 2> "$D/log" & PID=$!
for i in $(seq 200); do PORT=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: o=json.loads(l)
    except Exception: continue
    if o.get("msg")=="listening": print(o["port"])' "$D/log"); [ -n "$PORT" ] && break; sleep 0.05; done
api() { curl -sf "127.0.0.1:$PORT/json/1.3/$1" -H 'Authorization: Token SECRET_API_TOKEN' \
          -d "{\"request\":{\"application\":\"XXXXX-XXXXX\",\"auth\":\"SECRET_API_TOKEN\",$2}}"; }
for n in $(seq 0 119); do
  api registerDevice "\"hwid\":\"device-$n\",\"push_token\":\"$(printf '%064x' $n)\",\"language\":\"en\"" >/dev/null
  api setActivityPushToStartToken "\"hwid\":\"device-$n\",\"activity_push_to_start_token\":\"$(printf '%080x' $((n + 1000000)))\"" >/dev/null
done
for k in 0 1 2; do
  api startLiveActivity "\"notifications\":[{\"title\":\"Order\",\"live_activity\":{\"content-state\":{\"step\":1},\"attributes-type\":\"OrderAttributes\",\"attributes\":{}},\"live_activity_id\":\"LIVE_$k\",\"devices\":[\"device-$k\"]}]" >/dev/null
done
sleep 1.5   # the three starts go out (small messages), then their phones report their update tokens
for k in 0 1 2; do api setActivityToken "\"hwid\":\"device-$k\",\"activity_id\":\"LIVE_$k\",\"activity_token\":\"$(printf '%080x' $((k + 2000000)))\"" >/dev/null; done
api createFilter '"name":"all","conditions":[["Language","EQ","en"]]' >/dev/null
AHEAD=$(date -u -d '+120 seconds' '+%Y-%m-%d %H:%M')
for k in 0 1 2; do
  api updateLiveActivity "\"notifications\":[{\"live_activity\":{\"event\":\"update\",\"content-state\":{\"step\":2}},\"live_activity_id\":\"LIVE_$k\",\"send_date\":\"$AHEAD\",\"timezone\":\"UTC\"}]" >/dev/null
done
api startLiveActivity '"notifications":[{"title":"Sale","live_activity":{"content-state":{"left":100},"attributes-type":"SaleAttributes","attributes":{}},"live_activity_id":"HALF","filter":"all"}]' >/dev/null
for i in $(seq 400); do n=$(grep -c '"left' "$D/pushes.jsonl" 2>/dev/null || true); [ "${n:-0}" -ge 40 ] && break; sleep 0.02; done
for k in 0 1 2; do api updateLiveActivity "\"notifications\":[{\"live_activity\":{\"event\":\"update\",\"content-state\":{\"step\":3}},\"live_activity_id\":\"LIVE_$k\"}]" >/dev/null; done
kill -9 $PID; wait $PID 2>/dev/null || true
if [ -n "$PG" ]; then
  OUT="$HERE/in-flight-v22.postgresql.sql"
  $PG/pg_dump -h "$S" -U postgres -d postgres --schema=fixture --inserts --no-owner --no-privileges --no-comments -f "$OUT"
  $PG/psql -X -q -h "$S" -U postgres -d postgres -At -c "SET search_path = fixture; SELECT 'schema', MAX(version) FROM schema_migrations; SELECT 'HALF', m.state, m.claimed, m.cursor FROM messages m JOIN activities a ON a.id = m.activity WHERE a.activity_id = 'HALF'; SELECT 'held', COUNT(*) FROM scheduled_updates; SELECT 'unfinished', COUNT(*) FROM messages WHERE state IN ('pending','sending');"
  exit 0
fi
# SQLite replays its log on the next open anyway; the fixture is the one file that opening leaves.
OUT="$HERE/in-flight-v22.sqlite"
sqlite3 "$D/islet.sqlite" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
cp "$D/islet.sqlite" "$OUT"
sqlite3 "$OUT" "SELECT 'schema', MAX(version) FROM schema_migrations; SELECT 'HALF', m.state, m.claimed, m.cursor FROM messages m JOIN activities a ON a.id = m.activity WHERE a.activity_id = 'HALF'; SELECT 'held', COUNT(*) FROM scheduled_updates; SELECT 'deliveries of HALF', COUNT(*) FROM deliveries d JOIN messages m ON m.id = d.message JOIN activities a ON a.id = m.activity WHERE a.activity_id = 'HALF'; SELECT 'unfinished', COUNT(*) FROM messages WHERE state IN ('pending','sending');"; rm -f "$OUT-shm" "$OUT-wal"

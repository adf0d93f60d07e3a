#!/usr/bin/env python3
"""An APNs stand-in built on the `h2` package (not on Islet's HTTP/2 code), driven by a test.

Listens on 127.0.0.1 (TLS, ALPN h2), prints `{"event": "listening", "port": N}` first, then one JSON
line per request it reads. Commands arrive on stdin, one per line:
  status CODE [REASON]   answer every later request with CODE (200 by default)
  latency SECONDS        wait this long before answering
  drop-next              close the connection when the next request arrives, without answering it
  blackhole              stop reading and answering on the connections open now (they stay open)
  idle-close SECONDS     close a connection (TCP FIN, no GOAWAY) once it was idle this long
  channel-id ID          answer every later request with the header apns-channel-id: ID
  retry-after VALUE      answer every later request with the header retry-after: VALUE
Each request line carries its method, path, apns-expiration, apns-channel-id, content-type and body.
"""
import json, socket, sys, threading, time
import h2.config, h2.connection, h2.events
from peer_tls import lock, read_commands, say, serve as serve_tls

settings = {"status": 200, "reason": None, "latency": 0.0, "drop_next": False, "idle_close": None, "channel_id": None, "retry_after": None}
connections = []   # (socket, blackholed flag holder)


def serve(raw, number):
    state = {"blackholed": False}
    with lock:
        connections.append(state)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    raw.sendall(conn.data_to_send())
    requests = {}
    bodies = {}
    last = time.monotonic()
    raw.settimeout(0.2)
    while True:
        if state["blackholed"]:
            time.sleep(0.2)
            continue
        idle_close = settings["idle_close"]
        if idle_close is not None and time.monotonic() - last > idle_close:
            say(event="idle-close", connection=number)
            raw.close()
            return
        try:
            data = raw.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return
        if not data:
            raw.close()
            return
        last = time.monotonic()
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                requests[event.stream_id] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                           for k, v in requests.pop(event.stream_id, {}).items()}
                apns_id = headers.get("apns-id", "")
                say(event="request", connection=number, apns_id=apns_id, path=headers.get(":path"), method=headers.get(":method"),
                    push_type=headers.get("apns-push-type"), expiration=headers.get("apns-expiration"),
                    channel_id=headers.get("apns-channel-id"), content_type=headers.get("content-type"),
                    body=bodies.pop(event.stream_id, b"").decode("utf-8", "replace"))
                with lock:
                    drop = settings["drop_next"]
                    settings["drop_next"] = False
                    status, reason, latency = settings["status"], settings["reason"], settings["latency"]
                    channel_id = settings["channel_id"]
                    retry_after = settings["retry_after"]
                if drop:
                    say(event="dropped", connection=number, apns_id=apns_id)
                    raw.close()
                    return
                if latency:
                    time.sleep(latency)
                body = json.dumps({"reason": reason}).encode() if reason else b""
                answer = [(":status", str(status)), ("apns-id", apns_id)]
                if channel_id:
                    answer.append(("apns-channel-id", channel_id))
                if retry_after:
                    answer.append(("retry-after", retry_after))
                if body:
                    answer.append(("content-length", str(len(body))))
                conn.send_headers(event.stream_id, answer, end_stream=not body)
                if body:
                    conn.send_data(event.stream_id, body, end_stream=True)
        try:
            raw.sendall(conn.data_to_send())
        except OSError:
            return


def command(words):
    """Applies one stdin command (under the peer's lock)."""
    if words[0] == "status":
        settings["status"] = int(words[1])
        settings["reason"] = words[2] if len(words) > 2 else None
    elif words[0] == "latency":
        settings["latency"] = float(words[1])
    elif words[0] == "drop-next":
        settings["drop_next"] = True
    elif words[0] == "blackhole":
        for state in connections:
            state["blackholed"] = True
    elif words[0] == "idle-close":
        settings["idle_close"] = float(words[1])
    elif words[0] == "channel-id":
        settings["channel_id"] = words[1]
    elif words[0] == "retry-after":
        settings["retry_after"] = words[1]


def main():
    threading.Thread(target=read_commands, args=(command,), daemon=True).start()
    serve_tls(sys.argv[1], sys.argv[2], serve)


if __name__ == "__main__":
    main()

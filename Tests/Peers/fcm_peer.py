#!/usr/bin/env python3
"""An FCM HTTP v1 stand-in built on the `h2` package and PyJWT (not on Islet's code), driven by a test (issue 46).

Usage: fcm_peer.py CERTIFICATE KEY SERVICE_ACCOUNT_KEY_PEM PROJECT_ID (it checks assertions with the key's public half)
Listens on 127.0.0.1 (TLS, ALPN h2) and prints `{"event": "listening", "port": N}` first. It serves:
  POST /token   Google's token endpoint: a form with grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and an
                RS256 assertion, checked with the service account's public key (iss, scope, aud = this URL, iat, exp
                at most an hour after iat); answers an access token, or 400 invalid_grant naming what was wrong.
  POST /v1/projects/PROJECT_ID/messages:send
                needs `authorization: Bearer <a token it gave and did not expire>` (else 401 UNAUTHENTICATED), and a
                message the Pushwoosh Android SDK would show: `message.token`, `message.data` with string values only
                (keys and values at most 4096 bytes), `pw_msg`, and either `pw_live` (a Live Update) the JSON text of an
                object whose `op` is OPERATION_START, OPERATION_UPDATE or OPERATION_END and whose `id` is a non-empty
                string, or no `pw_live` and a `header` or `title` (an ordinary notification, op "NOTIFICATION"); no
                `notification` block; `android.priority` HIGH. A message that breaks a rule gets 400 INVALID_ARGUMENT
                naming it.
Every request prints one JSON line (event "token" or "send", with what was checked). Commands on stdin, one a line:
  fail TOKEN CODE [RETRY_AFTER]   answer sends to the registration token TOKEN with CODE (UNREGISTERED, QUOTA_EXCEEDED,
                                  UNAVAILABLE, INTERNAL, SENDER_ID_MISMATCH), with a retry-after header when given
  heal TOKEN                      answer TOKEN normally again
  expire-tokens                   every access token given so far is refused from now on (401 UNAUTHENTICATED)
  latency SECONDS                 wait this long before answering a send
"""
import json, sys, threading, time, urllib.parse
import h2.config, h2.connection, h2.events
import jwt
from cryptography.hazmat.primitives import serialization
from peer_tls import lock, read_commands, say, serve as serve_tls

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
STATUSES = {"UNREGISTERED": (404, "NOT_FOUND"), "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED"), "UNAVAILABLE": (503, "UNAVAILABLE"),
            "INTERNAL": (500, "INTERNAL"), "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED"), "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT")}
OPERATIONS = {"OPERATION_START", "OPERATION_UPDATE", "OPERATION_END"}

state = {"failing": {}, "tokens": {}, "latency": 0.0, "port": 0, "issued": 0, "messages": 0}


def fcm_error(code, message):
    status, canonical = STATUSES[code]
    body = {"error": {"code": status, "message": message, "status": canonical,
                      "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}]}}
    return status, body


def token_endpoint(body, public_key):
    """(status, body) for a token request."""
    form = urllib.parse.parse_qs(body.decode(), strict_parsing=False)
    if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
        return 400, {"error": "unsupported_grant_type", "error_description": f"grant_type {form.get('grant_type')}"}
    assertion = (form.get("assertion") or [""])[0]
    audience = f"https://127.0.0.1:{state['port']}/token"
    try:
        header = jwt.get_unverified_header(assertion)
        claims = jwt.decode(assertion, public_key, algorithms=["RS256"], audience=audience, options={"require": ["iss", "iat", "exp"]})
    except Exception as error:
        return 400, {"error": "invalid_grant", "error_description": f"{type(error).__name__}: {error}"}
    if not header.get("kid"):
        return 400, {"error": "invalid_grant", "error_description": "no kid in the assertion's header"}
    if claims.get("scope") != SCOPE:
        return 400, {"error": "invalid_scope", "error_description": f"scope {claims.get('scope')}"}
    if claims["exp"] - claims["iat"] > 3600:
        return 400, {"error": "invalid_grant", "error_description": "an assertion lives an hour at most"}
    with lock:
        state["issued"] += 1
        token = f"ya29.peer-{state['issued']}"
        state["tokens"][token] = time.time() + 3600
    return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}


def check_message(body):
    """The message's registration token and its pw_live, or raises ValueError naming the rule it breaks."""
    try:
        message = json.loads(body)["message"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("the body must be {\"message\": {...}}")
    token = message.get("token")
    if not isinstance(token, str) or not token:
        raise ValueError("message.token must be a registration token")
    if "notification" in message:
        raise ValueError("message.notification: a Live Update is a data message (Android would show the notification itself)")
    data = message.get("data")
    if not isinstance(data, dict) or any(not isinstance(v, str) for v in data.values()):
        raise ValueError("message.data must map strings to strings")
    if "pw_msg" not in data:
        raise ValueError("message.data.pw_msg: the Pushwoosh SDK ignores a push without it")
    if sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) > 4096:
        raise ValueError("message.data: keys and values take more than 4096 bytes")
    if "pw_live" not in data:
        if not data.get("header") and not data.get("title"):
            raise ValueError("message.data: an ordinary notification needs header or title to show")
        if (message.get("android") or {}).get("priority") not in ("HIGH", "high"):
            raise ValueError("message.android.priority must be HIGH")
        return token, {"op": "NOTIFICATION", "id": ""}, data, message.get("android") or {}
    try:
        live = json.loads(data.get("pw_live", ""))
    except ValueError:
        raise ValueError("message.data.pw_live must be the JSON text of an object")
    if not isinstance(live, dict) or live.get("op") not in OPERATIONS:
        raise ValueError(f"message.data.pw_live.op must be one of {sorted(OPERATIONS)}")
    if not isinstance(live.get("id"), str) or not live["id"]:
        raise ValueError("message.data.pw_live.id must be a non-empty string")
    if (message.get("android") or {}).get("priority") not in ("HIGH", "high"):
        raise ValueError("message.android.priority must be HIGH: a Live Update is shown at once")
    return token, live, data, message.get("android") or {}


def send_endpoint(headers, body):
    """(status, body, extra headers) for a send."""
    authorization = headers.get("authorization", "")
    bearer = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None
    with lock:
        valid = bearer is not None and state["tokens"].get(bearer, 0) > time.time()
        latency = state["latency"]
    if not valid:
        return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}, [], None
    try:
        token, live, data, android = check_message(body)
    except ValueError as error:
        status, answer = fcm_error("INVALID_ARGUMENT", str(error))
        return status, answer, [], {"rule": str(error)}
    if latency:
        time.sleep(latency)
    seen = {"token": token, "op": live["op"], "id": live["id"], "live": live, "data": data, "android": android}
    with lock:
        failing = state["failing"].get(token)
        state["messages"] += 1
        number = state["messages"]
    if failing:
        code, retry_after = failing
        status, answer = fcm_error(code, f"{code} for {token}")
        return status, answer, ([("retry-after", retry_after)] if retry_after else []), dict(seen, error=code)
    return 200, {"name": f"projects/{sys.argv[4]}/messages/{number}"}, [], seen


def serve(raw, number, public_key):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    raw.sendall(conn.data_to_send())
    requests, bodies = {}, {}
    while True:
        try:
            data = raw.recv(65536)
        except OSError:
            return
        if not data:
            raw.close()
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                requests[event.stream_id] = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                                             for k, v in event.headers}
            elif isinstance(event, h2.events.DataReceived):
                bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers = requests.pop(event.stream_id, {})
                body = bodies.pop(event.stream_id, b"")
                path, method = headers.get(":path"), headers.get(":method")
                extra = []
                if method == "POST" and path == "/token":
                    status, answer = token_endpoint(body, public_key)
                    say(event="token", connection=number, status=status, answer=answer)
                elif method == "POST" and path == f"/v1/projects/{sys.argv[4]}/messages:send":
                    status, answer, extra, seen = send_endpoint(headers, body)
                    say(event="send", connection=number, status=status, **(seen or {}))
                else:
                    status, answer = 404, {"error": {"code": 404, "message": f"no {method} {path}", "status": "NOT_FOUND"}}
                    say(event="unknown", connection=number, path=path, method=method)
                payload = json.dumps(answer).encode()
                conn.send_headers(event.stream_id, [(":status", str(status)), ("content-type", "application/json"),
                                                    ("content-length", str(len(payload)))] + extra)
                conn.send_data(event.stream_id, payload, end_stream=True)
        try:
            raw.sendall(conn.data_to_send())
        except OSError:
            return


def command(words):
    """Applies one stdin command (under the peer's lock)."""
    if words[0] == "fail":
        state["failing"][words[1]] = (words[2], words[3] if len(words) > 3 else None)
    elif words[0] == "heal":
        state["failing"].pop(words[1], None)
    elif words[0] == "expire-tokens":
        state["tokens"] = {token: 0 for token in state["tokens"]}
    elif words[0] == "latency":
        state["latency"] = float(words[1])


def main():
    public_key = serialization.load_pem_private_key(open(sys.argv[3], "rb").read(), None).public_key()
    threading.Thread(target=read_commands, args=(command,), daemon=True).start()
    serve_tls(sys.argv[1], sys.argv[2], lambda tls, number: serve(tls, number, public_key), ready=lambda port: state.update(port=port))

if __name__ == "__main__":
    main()

"""What the Python test peers share (`h2_apns.py`, `fcm_peer.py`): a TLS listener on 127.0.0.1 speaking h2, its
accept loop, and the loop that reads commands from stdin. They share no code with Islet."""
import json, socket, ssl, sys, threading

lock = threading.Lock()


def say(**fields):
    """One JSON line on stdout: what the test reads."""
    with lock:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def read_commands(apply):
    """Calls `apply(words)` under the lock for every non-empty stdin line, then confirms it with an "ok" event."""
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        with lock:
            apply(words)
        say(event="ok", command=words[0])


def serve(certificate, key, handle, ready=None):
    """Listens on 127.0.0.1 (TLS, ALPN h2, a free port), says `listening` with the port (after `ready(port)`), and runs
    `handle(tls_socket, number)` on a thread of its own for each connection, numbered from 1; never returns."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    if ready:
        ready(port)
    say(event="listening", port=port)
    number = 0
    while True:
        client, _ = listener.accept()
        try:
            tls = context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            client.close()
            continue
        number += 1
        say(event="connection", connection=number)
        threading.Thread(target=handle, args=(tls, number), daemon=True).start()

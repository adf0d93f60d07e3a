#!/usr/bin/env python3
"""aioapns (PyPI) sending Islet's benchmark pushes to the sink of `islet-bench apns` on 127.0.0.1.

aioapns always connects to Apple's host on port 443: the benchmark points its protocol class at the
sink's port instead and gives it an SSL context that trusts the sink's self-signed certificate and
offers ALPN h2 (aioapns' default context offers none). Nothing else of aioapns is changed.

Prints a summary and a last line `RESULT pushes=N ok=N seconds=S rate=R` for islet-bench to read.
"""
import argparse
import asyncio
import json
import ssl
import sys
import time

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="the sink's port on 127.0.0.1")
    parser.add_argument("--ca", required=True, help="the sink's self-signed certificate (PEM)")
    parser.add_argument("--key", required=True, help="the P-256 signing key (PEM)")
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--payload", required=True, help="a file with the JSON payload every push carries")
    parser.add_argument("--pushes", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=2, help="aioapns max_connections (ours uses 2)")
    parser.add_argument("--in-flight", type=int, default=100,
                        help="pushes awaiting an answer at once (more makes aioapns slower: a busy pool polls every 10 ms)")
    return parser.parse_args()


TOKEN_PREFIX = "ab" * 24


def request(n, message, topic):
    """Push number n, as islet-bench builds it: its own 64-hex token and apns-id."""
    hex16 = "%016x" % n
    return NotificationRequest(
        device_token=TOKEN_PREFIX + hex16,
        message=message,
        notification_id="00000000-0000-4000-8000-" + hex16[-12:],
        priority=10,
        push_type=PushType.LIVEACTIVITY,
        apns_topic=topic,
    )


async def main(arguments):
    APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
    APNsProductionClientProtocol.APNS_PORT = arguments.port
    context = ssl.create_default_context(cafile=arguments.ca)
    context.set_alpn_protocols(["h2"])
    with open(arguments.key) as file:
        key = file.read()
    with open(arguments.payload) as file:
        message = json.load(file)
    client = APNs(key=key, key_id=arguments.key_id, team_id=arguments.team_id, topic=arguments.topic,
                  max_connections=arguments.connections, ssl_context=context)

    ok = 0
    failures = {}
    next_push = 0

    async def sender():
        nonlocal ok, next_push
        while next_push < arguments.pushes:
            n = next_push
            next_push += 1
            result = await client.send_notification(request(n, message, arguments.topic))
            if result.is_successful:
                ok += 1
            else:
                failures[result.status] = failures.get(result.status, 0) + 1

    start = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(min(arguments.in_flight, arguments.pushes))))
    seconds = time.perf_counter() - start
    client.pool.close()
    rate = arguments.pushes / seconds
    print("aioapns: %d pushes (%d answered 200%s) in %.3f s: %.0f pushes/s" % (
        arguments.pushes, ok, "".join(", %d answered %s" % (c, s) for s, c in failures.items()), seconds, rate))
    print("RESULT pushes=%d ok=%d seconds=%.6f rate=%.1f" % (arguments.pushes, ok, seconds, rate))
    return 0 if ok == arguments.pushes else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_arguments())))

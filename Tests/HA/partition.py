#!/usr/bin/env python3
"""One Islet node cut off from PostgreSQL mid fan-out (issue 47), run by `make test-ha` (as root: it makes a network
namespace).

Node A runs in a network namespace of its own, reaching PostgreSQL through a veth pair; node B beside PostgreSQL.
A start by filter goes to every device; once A is sending its share, every packet from A to PostgreSQL is dropped
(sent to a hardware address nobody has: its connections stay open and carry nothing, as when a route is lost) for longer than a lease,
then the cut is healed. Meanwhile a probe inside the namespace calls A's API every 100 ms.

Checked, and the figures printed:
- A sends nothing once its lease ran out, until the heal;
- every device got the start, a second copy only as the same request, and at most the pushes A had on the wire
  when the cut began (`--max-repeats`);
- every call to A during the cut was answered within a second, 503 when it needed the database, never 500;
- A answers updates again within seconds of the heal.
"""
import argparse
import json
import os
import pwd
import subprocess
import sys
import tempfile
import time

from islet_ha import (APP, PG_BIN, Failure, Node, Record, conclude, finished, log, seed_devices_sql, seed_through_api,
                      start_everyone, start_failures, unused_ports, wait_until)

# Calls A's API from inside its namespace (where it listens on 127.0.0.1): one JSON line a call, until stdin closes.
PROBE = r"""
import http.client, json, sys, threading, time
port, every = int(sys.argv[1]), float(sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
n = 0
while not stop.is_set():
    for method, request in [("getApplication", {}),
                            ("updateLiveActivity", {"application": "%s", "notifications": [{"live_activity": {"event": "update",
                             "content-state": {"step": 1000 + n}}, "live_activity_id": "ORDER_0"}]})]:
        sent = time.time()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("POST", "/json/1.3/" + method, json.dumps({"request": request}),
                               {"Authorization": "Token SECRET_API_TOKEN"})
            status = connection.getresponse().status
        except OSError:
            status = 0
        finally:
            connection.close()
        print(json.dumps({"at": sent, "method": method, "status": status, "took": time.time() - sent}), flush=True)
    n += 1
    stop.wait(every)
""" % APP


def run(command, **options):
    return subprocess.run(command, check=True, capture_output=True, text=True, **options)


class Namespace:
    """A network namespace joined to this one by a veth pair: 10.147.0.1 here, 10.147.0.2 there."""

    def __init__(self):
        suffix = str(os.getpid() % 100000)
        self.name = "islet-cut-" + suffix
        self.outside = "isleto" + suffix
        self.inside = "isleti" + suffix
        run(["ip", "netns", "add", self.name])
        run(["ip", "link", "add", self.outside, "type", "veth", "peer", "name", self.inside])
        run(["ip", "link", "set", self.inside, "netns", self.name])
        run(["ip", "addr", "add", "10.147.0.1/30", "dev", self.outside])
        run(["ip", "link", "set", self.outside, "up"])
        self.exec(["ip", "addr", "add", "10.147.0.2/30", "dev", self.inside])
        self.exec(["ip", "link", "set", self.inside, "up"])
        self.exec(["ip", "link", "set", "lo", "up"])

    @property
    def prefix(self):
        return ["ip", "netns", "exec", self.name]

    def exec(self, command):
        return run(self.prefix + command)

    def cut(self):
        """Every packet leaving the namespace for this side goes to a hardware address nobody has, and this side drops
        it: nothing is refused, nothing arrives, and the sender sees no error (a lost route, a black hole)."""
        self.exec(["ip", "neigh", "replace", "10.147.0.1", "lladdr", "02:00:00:00:00:01", "dev", self.inside, "nud", "permanent"])

    def heal(self):
        self.exec(["ip", "neigh", "del", "10.147.0.1", "dev", self.inside])

    def remove(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)


class Postgres:
    """A throwaway PostgreSQL listening on 127.0.0.1 and on the veth's address, fsync on."""

    def __init__(self, directory, port):
        self.directory = directory
        self.port = port
        self.data = directory + "/pg"
        self.as_root = os.getuid() == 0
        if self.as_root:
            user = pwd.getpwnam("postgres")
            os.chown(directory, user.pw_uid, user.pw_gid)
        self.command([PG_BIN + "/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
        with open(self.data + "/pg_hba.conf", "a") as hba:
            hba.write("host all all 10.147.0.0/30 trust\n")
        self.command([PG_BIN + "/pg_ctl", "-D", self.data, "-w", "-s", "-l", directory + "/postgres.log", "-o",
                      f"-c listen_addresses='127.0.0.1,10.147.0.1' -p {port} -k {directory} -c max_connections=200", "start"])

    def command(self, arguments):
        return run((["runuser", "-u", "postgres", "--"] if self.as_root else []) + arguments)

    def psql(self, database, sql):
        return self.command([PG_BIN + "/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                             "-U", "postgres", "-d", database, "-c", sql]).stdout.strip()

    def stop(self):
        subprocess.run((["runuser", "-u", "postgres", "--"] if self.as_root else []) +
                       [PG_BIN + "/pg_ctl", "-D", self.data, "-m", "immediate", "-s", "stop"], capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="the islet-test-server binary")
    parser.add_argument("--devices", type=int, default=20000)
    parser.add_argument("--cut-seconds", type=float, default=30)
    parser.add_argument("--lease-seconds", type=float, default=10, help="the nodes' lease (islet-test-server's default)")
    parser.add_argument("--max-repeats", type=int, default=600,
                        help="the pushes A may have on the wire at the cut: 3 batches of 100 for each of its 2 workers")
    parser.add_argument("--port", type=int, default=None, help="PostgreSQL's port (default: the first free one from 26450)")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()
    options.server = os.path.abspath(options.server)
    if os.getuid() != 0:
        sys.exit("partition.py: needs root (ip netns)")

    directory = tempfile.mkdtemp(prefix="islet-cut-")
    namespace = Namespace()
    postgres = None
    nodes = []
    probe = None
    failures = []
    try:
        options.port = options.port or unused_ports(26450, 1)
        postgres = Postgres(directory, options.port)
        postgres.psql("postgres", "CREATE DATABASE islet")
        record = Record(directory + "/pushes.jsonl")
        b = Node(options.server, "node-b", f"postgresql://postgres@127.0.0.1:{options.port}/islet", record.path, directory)
        nodes.append(b)
        a = Node(options.server, "node-a", f"postgresql://postgres@10.147.0.1:{options.port}/islet", record.path, directory,
                 prefix=namespace.prefix)
        nodes.append(a)
        postgres.psql("islet", seed_devices_sql(options.devices))
        seed_through_api([b.port], 1)
        probe_log = open(directory + "/probe.jsonl", "w")
        probe = subprocess.Popen(namespace.prefix + [sys.executable, "-c", PROBE, str(a.port), "0.1"], stdin=subprocess.PIPE,
                                 stdout=probe_log, stderr=subprocess.STDOUT, text=True)
        code = start_everyone(b.port, 1)
        by_a = lambda: sum(1 for push in record.read() if push[4] == 1 and push[0] == "node-a")
        wait_until("node A to send its share", 120, lambda: by_a() >= 300, every=0.01)
        namespace.cut()
        cut = time.time()
        at_cut = by_a()
        log(f"node A cut off from PostgreSQL, having sent {at_cut}")
        time.sleep(options.lease_seconds + 2)
        at_lease = by_a()
        time.sleep(max(0, cut + options.cut_seconds - time.time()))
        before_heal = by_a()
        namespace.heal()
        healed = time.time()
        log(f"healed after {healed - cut:.1f} s; node A had sent {at_lease - at_cut} more by the end of its lease, then {before_heal - at_lease}")
        wait_until("the start to finish", 180, lambda: finished([b.port], code), every=0.5)
        time.sleep(3)
        probe.stdin.close()
        probe.wait(10)
        probe = None
        calls = [json.loads(line) for line in open(directory + "/probe.jsonl") if line.startswith("{")]
        during = [c for c in calls if cut <= c["at"] < healed]
        slow = [c for c in during if c["took"] >= 1.0]
        statuses = {}
        for c in during:
            statuses[(c["method"], c["status"])] = statuses.get((c["method"], c["status"]), 0) + 1
        back = next((c["at"] for c in calls if c["at"] >= healed and c["method"] == "updateLiveActivity" and c["status"] == 200), None)
        (delivered, repeats, _), broken = start_failures(record, 1, options.devices, options.max_repeats)
        failures += broken
        log(f"{delivered} of {options.devices} devices got the start, {repeats} repeats; during the cut node A answered "
            f"{ {f'{m} {s}': n for (m, s), n in sorted(statuses.items())} }, slowest {max((c['took'] for c in during), default=0):.2f} s; "
            f"updates answered 200 again {(back - healed) if back else float('nan'):.1f} s after the heal")
        if before_heal != at_lease:
            failures.append(f"node A sent {before_heal - at_lease} pushes after its lease ran out")
        if slow:
            failures.append(f"{len(slow)} calls to node A during the cut took a second or more (slowest {max(c['took'] for c in slow):.2f} s)")
        if any(s not in (200, 503) for (_, s) in statuses):
            failures.append(f"node A answered {statuses} during the cut: only 200 and 503 may be")
        if not during:
            failures.append("the probe made no call during the cut")
        if back is None or back - healed > 10:
            failures.append("node A did not answer an update with 200 within 10 s of the heal")
    except (Failure, subprocess.CalledProcessError) as failure:
        failures.append(f"{failure} {getattr(failure, 'stderr', '') or ''}".strip())
    finally:
        if probe:
            probe.kill()
        for node in nodes:
            node.stop()
        if postgres:
            postgres.stop()
        namespace.remove()
    conclude(failures, directory, options.keep)


if __name__ == "__main__":
    main()

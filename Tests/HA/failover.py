#!/usr/bin/env python3
"""Islet through a PostgreSQL failover (issue 47), run by `make test-ha`.

Starts a pg_auto_failover formation on this machine (a monitor, a primary and a synchronous secondary, each
Postgres listening on 127.0.0.1 only), three `islet-test-server` nodes on its multi-host URL (each records every
push it hands to "APNs" in one shared file, in the order sent), devices and 200 Live Activities, then for each run:
a start by filter to every device and a steady stream of updates to the activities, and mid-way the primary's
machine is lost (its pg_autoctl keeper and Postgres killed with SIGKILL; with `--switchover`, a planned
`pg_autoctl perform switchover` instead). The monitor promotes the secondary; the killed node then joins
again as the new secondary before the next run.

Checked after each run, and the figures printed:
- every device got the start, and a second copy only as the same request (same apns-id and bytes); how many
  repeats there were, against `--max-repeats`;
- no update answered 200 was lost: each activity's device got, last, the latest step answered 200;
- no answer was a 500; how long the API answered 503 (first to last 503 of the run).

Exits 1 when a check fails. Needs `pg_autoctl` (Debian: postgresql-15-auto-failover, pg-auto-failover-cli).
As root, PostgreSQL runs as the `postgres` user.
"""
import argparse
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from islet_ha import (PG_BIN, Failure, Node, Record, Updates, conclude, finished, log, seed_devices_sql, seed_through_api,
                      start_everyone, start_failures, undelivered, unused_ports, wait_until)


class Formation:
    """A pg_auto_failover monitor and two data nodes, in a folder of their own."""

    def __init__(self, directory, port_base):
        self.directory = directory
        self.monitor_port = port_base
        self.ports = {"pg1": port_base + 1, "pg2": port_base + 2}
        self.as_root = os.getuid() == 0
        self.keepers = {}
        self.env = dict(os.environ, PATH=PG_BIN + ":" + os.environ.get("PATH", ""),
                        XDG_CONFIG_HOME=directory + "/config", XDG_DATA_HOME=directory + "/share",
                        XDG_RUNTIME_DIR=directory + "/run", PGCONNECT_TIMEOUT="3")
        os.makedirs(directory + "/run", exist_ok=True)
        if self.as_root:
            user = pwd.getpwnam("postgres")
            for path in [directory, directory + "/run"]:
                os.chown(path, user.pw_uid, user.pw_gid)

    def command(self, arguments):
        return (["runuser", "-u", "postgres", "--"] if self.as_root else []) + arguments

    def spawn(self, name, arguments):
        """Runs a pg_autoctl in a session of its own, so the whole machine of a node can be killed at once."""
        output = open(f"{self.directory}/{name}.log", "ab")
        self.keepers[name] = subprocess.Popen(self.command(arguments), env=self.env, cwd=self.directory, stdout=output,
                                              stderr=subprocess.STDOUT, start_new_session=True)

    def autoctl(self, *arguments, check=True):
        result = subprocess.run(self.command(["pg_autoctl", *arguments]), env=self.env, cwd=self.directory,
                                capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise Failure(f"pg_autoctl {' '.join(arguments)}: {result.stderr.strip()}")
        return result.stdout

    def psql(self, port, database, sql):
        result = subprocess.run(self.command([PG_BIN + "/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                                              "-p", str(port), "-U", "postgres", "-d", database, "-c", sql]),
                                env=self.env, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise Failure(f"psql on {port}: {result.stderr.strip()}")
        return result.stdout.strip()

    def start(self):
        common = ["--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"]
        self.spawn("monitor", ["pg_autoctl", "create", "monitor", "--pgdata", self.directory + "/monitor",
                               "--pgport", str(self.monitor_port), *common])
        wait_until("the monitor", 60, lambda: self.try_psql(self.monitor_port, "pg_auto_failover", "SELECT 1") == "1")
        # Failure detection in seconds rather than the defaults' 20 s and 30 s: the old primary is gone for good here
        # (its keeper is killed with it), so nothing is lost by not waiting for it to demote itself.
        settings = {"health_check_period": 1000, "health_check_timeout": 1000, "health_check_max_retries": 1,
                    "health_check_retry_delay": 500, "node_considered_unhealthy_timeout": 3000, "primary_demote_timeout": 3000}
        for name, value in settings.items():
            self.psql(self.monitor_port, "pg_auto_failover", f"ALTER SYSTEM SET pgautofailover.{name} = {value}")
        self.psql(self.monitor_port, "pg_auto_failover", "SELECT pg_reload_conf()")
        for name in ["pg1", "pg2"]:
            self.spawn(name, ["pg_autoctl", "create", "postgres", "--pgdata", f"{self.directory}/{name}", "--pgport", str(self.ports[name]),
                              "--name", name, "--monitor", f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable",
                              *common])
            # One at a time: the second joins the first as its secondary.
            wait_until(f"{name} to join", 120, lambda: self.states().get(name) in ("single", "primary", "secondary"), every=0.5)
            if name == "pg1":
                self.quick_checkpoints(self.ports[name])
        wait_until("a primary and a secondary", 120, self.settled, every=0.5)

    def quick_checkpoints(self, port):
        """A lost primary that pg_rewind cannot bring back joins again by pg_basebackup, which first waits for a
        checkpoint on the new primary; with the defaults (5 min, spread over 90 % of it) that wait alone can outlast
        the test's. Set on the first node before the second copies it, so both have it."""
        for setting in ["checkpoint_timeout = '30s'", "checkpoint_completion_target = 0.5"]:
            self.psql(port, "postgres", f"ALTER SYSTEM SET {setting}")
        self.psql(port, "postgres", "SELECT pg_reload_conf()")

    def try_psql(self, port, database, sql):
        try:
            return self.psql(port, database, sql)
        except (Failure, subprocess.TimeoutExpired):
            return None

    def states(self):
        """Each node's reported state, as the monitor has it."""
        rows = self.try_psql(self.monitor_port, "pg_auto_failover",
                             "SELECT nodename || ' ' || reportedstate || ' ' || goalstate FROM pgautofailover.node") or ""
        states = {}
        for row in rows.splitlines():
            name, reported, goal = row.split(" ")
            states[name] = reported if reported == goal else reported + "->" + goal
        return states

    def settled(self):
        return sorted(self.states().values()) == ["primary", "secondary"]

    def primary(self):
        """The node that takes writes: `wait_primary` takes them too, while its secondary is away."""
        return next((name for name, state in self.states().items() if state in ("primary", "wait_primary", "single")), None)

    def url(self, database):
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports.values())
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def lose(self, name):
        """The node's machine is lost: its pg_autoctl processes and its Postgres, killed at once."""
        keeper = self.keepers.pop(name)
        postmaster = None
        try:
            with open(f"{self.directory}/{name}/postmaster.pid") as pid_file:
                postmaster = int(pid_file.readline())
        except (OSError, ValueError):
            pass
        try:
            os.killpg(keeper.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in [postmaster] + self.children_of(postmaster):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        keeper.wait()

    @staticmethod
    def children_of(pid):
        if not pid:
            return []
        result = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
        return [int(line) for line in result.stdout.split()]

    def rejoin(self, name):
        self.spawn(name, ["pg_autoctl", "run", "--pgdata", f"{self.directory}/{name}"])

    def stop(self):
        for name in list(self.keepers):
            self.lose(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="the islet-test-server binary")
    parser.add_argument("--devices", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--activities", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50, help="updates a second")
    parser.add_argument("--switchover", action="store_true", help="a planned switchover instead of a lost primary")
    parser.add_argument("--max-repeats", type=int, default=200,
                        help="repeats allowed a run: pushes whose answer was lost on the wire, at most a batch of 100 per worker of the node "
                             "that sent them (two)")
    parser.add_argument("--max-unavailable", type=float, default=None,
                        help="the longest the API may answer 503 in a run, in seconds (not checked when absent)")
    parser.add_argument("--max-late", type=float, default=2.0,
                        help="the longest the API may answer 503 once the new primary takes writes, in seconds")
    parser.add_argument("--port-base", type=int, default=None,
                        help="the monitor's port, the nodes' next (default: the first free ones from 26400)")
    parser.add_argument("--keep", action="store_true", help="keep the folder (logs, record) afterwards")
    options = parser.parse_args()
    options.server = os.path.abspath(options.server)
    if shutil.which("pg_autoctl") is None:
        sys.exit("failover.py: pg_autoctl is missing (scripts/install-deps --test installs it)")

    directory = tempfile.mkdtemp(prefix="islet-ha-")
    formation = Formation(directory, options.port_base or unused_ports(26400, 3))
    nodes = []
    failures = []
    try:
        log(f"formation in {directory}")
        formation.start()
        primary = formation.primary()
        formation.psql(formation.ports[primary], "postgres", "CREATE DATABASE islet")
        url = formation.url("islet")
        record = Record(directory + "/pushes.jsonl")
        for n in range(1, 4):
            nodes.append(Node(options.server, f"node-{n}", url, record.path, directory))
        ports = [node.port for node in nodes]
        log(f"nodes on {url}: ports " + ", ".join(str(port) for port in ports))
        formation.psql(formation.ports[primary], "islet", seed_devices_sql(options.devices))
        seed_through_api(ports, options.activities)
        step = 1
        for run in range(1, options.runs + 1):
            updates = Updates(nodes, options.activities, options.rate, step)
            updates.start()
            code = start_everyone(ports[1], run)
            wait_until("a third of the start to be sent", 120,
                       lambda: sum(1 for push in record.read() if push[4] == run) >= options.devices // 3, every=0.01)
            old = formation.primary()
            switched = time.monotonic()
            if options.switchover:
                log(f"run {run}: switchover from {old}")
                formation.autoctl("perform", "switchover", "--pgdata", directory + "/monitor", "--formation", "default")
            else:
                log(f"run {run}: {old}'s machine lost")
                formation.lose(old)
            new = wait_until("a new primary", 120, lambda: (formation.primary() or old) != old and formation.primary(), every=0.1)
            promoted = time.monotonic() - switched
            log(f"run {run}: {new} takes writes {promoted:.1f} s after")
            # Updates go on for a while on the new primary, then stop.
            time.sleep(10)
            updates.stopping.set()
            updates.join()
            step = updates.next_step
            wait_until(f"the start of round {run} to finish", 180, lambda: finished(ports, code), every=0.5)
            try:
                wait_until("every activity's latest accepted update", 60, lambda: not undelivered(record, updates.answers), every=0.5)
            except Failure:
                failures.append(f"run {run}: activities whose latest accepted update is not the last they got: {undelivered(record, updates.answers)[:20]}")
            (delivered, repeats, _), broken = start_failures(record, run, options.devices, options.max_repeats)
            failures += [f"run {run}: {failure}" for failure in broken]
            statuses = {}
            for answer in updates.answers:
                statuses[answer[3]] = statuses.get(answer[3], 0) + 1
            refused = [answer[0] for answer in updates.answers if answer[3] != 200]
            unavailable = (max(refused) - min(refused)) if refused else 0.0
            late = max(0.0, max(refused) - (switched + promoted)) if refused else 0.0
            slowest = max((answer[4] for answer in updates.answers), default=0.0)
            log(f"run {run}: {delivered} of {options.devices} devices got the start, {repeats} repeats; "
                f"updates answered {statuses}; 503 for {unavailable:.1f} s, {late:.1f} s of it after the new primary took writes "
                f"({promoted:.1f} s after the {'switchover' if options.switchover else 'loss'}); slowest answer {slowest:.2f} s")
            if set(statuses) - {200, 503}:
                failures.append(f"run {run}: updates answered {statuses}: only 200 and 503 may be")
            if late > options.max_late:
                failures.append(f"run {run}: the API answered 503 for {late:.1f} s after the new primary took writes, more than {options.max_late} s")
            if options.max_unavailable is not None and unavailable > options.max_unavailable:
                failures.append(f"run {run}: the API answered 503 for {unavailable:.1f} s, more than {options.max_unavailable} s")
            if not options.switchover:
                formation.rejoin(old)
            wait_until("the formation to settle", 180, formation.settled, every=0.5)
    except Failure as failure:
        failures.append(str(failure))
    finally:
        for node in nodes:
            node.stop()
        formation.stop()
    conclude(failures, directory, options.keep)


if __name__ == "__main__":
    main()

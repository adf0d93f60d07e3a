"""What Islet's database-failure tests share (issue 47): the Islet nodes (`islet-test-server`, each recording every push
it hands to "APNs" in one shared file), API calls, the record of pushes, the stream of updates, and the set-up of
devices and activities.
"""
import http.client
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
AUTH = "SECRET_API_TOKEN"
APP = "XXXXX-XXXXX"


def log(message):
    print(time.strftime("%H:%M:%S ") + message, flush=True)


class Failure(Exception):
    pass


def unused_ports(first, count):
    """The first run of `count` consecutive ports from `first` that nobody holds on 127.0.0.1. Choose `first` below the
    kernel's ephemeral range (32768 and up on Debian): a port in it can be taken at any moment by an outgoing
    connection, and PostgreSQL then cannot listen on it."""
    def free(port):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False
    for base in range(first, 32768 - count):
        if all(free(port) for port in range(base, base + count)):
            return base
    raise Failure(f"no {count} free ports from {first} below 32768")


def wait_until(what, timeout, condition, every=0.2):
    """Waits for `condition()` to be truthy, up to `timeout` seconds; returns its value or raises."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Failure(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Node:
    """One islet-test-server: batches of 100 pushes, answered in 40 ms, two workers, shards of 1,000 devices, a lease of
    10 s. `prefix` runs it in another network namespace (`ip netns exec NAME`)."""

    def __init__(self, server, name, url, record, directory, prefix=()):
        self.name = name
        self.log_path = f"{directory}/{name}.log"
        self.process = subprocess.Popen([*prefix, server, "--database", url, "--record", record, "--node-id", name, "--batch-size", "100",
                                         "--batch-delay-ms", "40", "--workers", "2", "--shard-span", "1000"],
                                        stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT, cwd=directory)
        self.port = wait_until(f"{name} to listen", 60, self.listening)

    def listening(self):
        if self.process.poll() is not None:
            raise Failure(f"{self.name} exited: {open(self.log_path).read()[-2000:]}")
        with open(self.log_path) as lines:
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "listening":
                    return entry["port"]
        return None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def call(port, method, request, timeout=5.0):
    """POSTs a JSON API call; returns (status, body object or None). A status of 0: no answer in `timeout`."""
    body = json.dumps({"request": request}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/json/1.3/" + method, body, {"Content-Type": "application/json", "Authorization": "Token " + AUTH})
        response = connection.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, None
    except OSError:
        return 0, None
    finally:
        connection.close()


class Record:
    """The pushes every node handed to "APNs", read as the file grows."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.pushes = []

    def read(self):
        try:
            with open(self.path, "rb") as record:
                record.seek(self.offset)
                data = record.read()
        except FileNotFoundError:
            return self.pushes
        end = data.rfind(b"\n")
        if end < 0:
            return self.pushes
        self.offset += end + 1
        for line in data[:end].split(b"\n"):
            try:
                push = json.loads(line)
                state = json.loads(push["payload"])["aps"]["content-state"]
            except (ValueError, KeyError):
                continue
            self.pushes.append((push["node"], push["token"], push["apns_id"], push["payload"], state.get("round"), state.get("step")))
        return self.pushes


class Updates(threading.Thread):
    """A steady stream of updates to the activities, through every node in turn; every answer kept."""

    def __init__(self, nodes, activities, rate, first_step):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.activities = activities
        self.rate = rate
        self.step = first_step
        self.answers = []   # (monotonic time, activity, step, status, seconds taken)
        self.stopping = threading.Event()

    def run(self):
        n = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            activity = n % self.activities
            step = self.step + n // self.activities
            node = self.nodes[n % len(self.nodes)]
            sent = time.monotonic()
            status, _ = call(node.port, "updateLiveActivity", {
                "application": APP, "notifications": [{"live_activity": {"event": "update", "content-state": {"step": step}},
                                                       "live_activity_id": f"ORDER_{activity}"}]})
            self.answers.append((sent, activity, step, status, time.monotonic() - sent))
            n += 1
            pause = started + n / self.rate - time.monotonic()
            if pause > 0:
                self.stopping.wait(pause)
        self.next_step = self.step + n // self.activities + 1


def order_token(n):
    return "%064x" % (700_000 + n)


def seed_devices_sql(devices):
    """SQL adding `devices` devices with push-to-start tokens, straight into the database: registering them one by one
    would take most of a run, and registration is not under test here."""
    return f"""
        INSERT INTO devices (application, hwid, push_token, sandbox, language, updated_at)
            SELECT '{APP}', 'bulk-' || n, lpad(to_hex(n), 64, '0'), 0, 'en', 1 FROM generate_series(1, {devices}) n;
        INSERT INTO push_to_start_tokens (device, attributes_type, token, updated_at)
            SELECT id, '', lpad(to_hex(id + 1000000), 80, '0'), 1 FROM devices WHERE hwid LIKE 'bulk-%';"""


def seed_through_api(ports, activities):
    """The filter `bulk` (every seeded device), and `activities` Live Activities ORDER_n, each with one device that reported
    its update token, made through the API of the nodes at `ports` in turn."""
    status, _ = call(ports[0], "createFilter", {"name": "bulk", "conditions": [["Language", "EQ", "en"]]})
    if status != 200:
        raise Failure(f"createFilter answered {status}")
    for n in range(activities):
        port = ports[n % len(ports)]
        steps = [("registerDevice", {"application": APP, "hwid": f"order-{n}", "push_token": "%064x" % (900_000 + n), "language": "fr"}),
                 ("startLiveActivity", {"application": APP, "notifications": [{
                     "title": "Order", "live_activity": {"content-state": {"step": 0}, "attributes-type": "OrderAttributes", "attributes": {}},
                     "live_activity_id": f"ORDER_{n}", "devices": [f"order-{n}"]}]}),
                 ("setActivityToken", {"application": APP, "hwid": f"order-{n}", "activity_id": f"ORDER_{n}", "activity_token": order_token(n)})]
        for method, request in steps:
            status, answer = call(port, method, request)
            if status != 200:
                raise Failure(f"{method} for order {n} answered {status}: {answer}")


def start_everyone(port, round_number):
    """A start of round `round_number` to the filter `bulk`; its message code."""
    status, answer = call(port, "startLiveActivity", {"application": APP, "notifications": [{
        "title": "Round", "live_activity": {"content-state": {"round": round_number}, "attributes-type": "OrderAttributes", "attributes": {}},
        "live_activity_id": f"EVERYONE_{round_number}", "filter": "bulk"}]})
    if status != 200:
        raise Failure(f"the start of round {round_number} answered {status}: {answer}")
    return answer["response"]["Messages"][0]


def finished(ports, code):
    """True once a node says the message is done."""
    for port in ports:
        status, answer = call(port, "getMessageDetails", {"message": code})
        if status == 200:
            return answer["response"]["message"]["status"] == "done"
    return False


def round_figures(record, round_number):
    """How many devices got round `round_number`'s start, how many copies beyond one, and how many devices got two
    different requests (another apns-id or other bytes)."""
    by_token = {}
    pushes = [push for push in record.read() if push[4] == round_number]
    for push in pushes:
        by_token.setdefault(push[1], []).append(push)
    different = [token for token, copies in by_token.items() if len({(c[2], c[3]) for c in copies}) > 1]
    return len(by_token), len(pushes) - len(by_token), len(different)


def start_failures(record, round_number, devices, max_repeats):
    """The round's figures (devices that got its start, copies beyond one, devices that got two different requests) and
    what they break: every device gets the start, repeats only as the same request, at most `max_repeats` of them."""
    delivered, repeats, different = round_figures(record, round_number)
    failures = []
    if delivered != devices:
        failures.append(f"{devices - delivered} devices did not get the start")
    if repeats > max_repeats:
        failures.append(f"{repeats} repeats, more than {max_repeats}")
    if different:
        failures.append(f"{different} devices got two different starts")
    return (delivered, repeats, different), failures


def undelivered(record, answers):
    """The activities whose device did not get, last, the latest update answered 200 (`Updates.answers`)."""
    accepted = {}
    for _, activity, step, status, _ in answers:
        if status == 200:
            accepted[activity] = max(accepted.get(activity, 0), step)
    last = {}
    for _, token, _, _, _, step in record.read():
        if step is not None:
            last[token] = step
    return [n for n, wanted in accepted.items() if last.get(order_token(n)) != wanted]


def conclude(failures, directory, keep):
    """Keeps the run's folder (logs, record) when asked or when a check failed, says what failed, and exits 1 if any did."""
    if keep or failures:
        log(f"kept {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    for failure in failures:
        log("FAILED: " + failure)
    sys.exit(1 if failures else 0)

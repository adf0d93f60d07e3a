# Islet: `make run` starts the server, `make test` runs every test. Both install what is missing first.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

LISTEN ?= 127.0.0.1:8080
DATABASE ?= var/islet.sqlite

.PHONY: deps build run test test-packaging test-ha deb bench fuzz clean

deps:
	@scripts/install-deps

# Release builds link the Swift runtime statically, so the binary (and the Debian package) needs only Debian's
# libraries; with the toolchain's lld, which does not repeat glibc's link-time notes about Foundation's mktemp.
RELEASE_FLAGS := -c release --static-swift-stdlib -Xswiftc -use-ld=lld
build: deps
	swift build $(RELEASE_FLAGS) --product islet

run: build
	@case "$(DATABASE)" in postgres://*|postgresql://*) ;; *) mkdir -p $(dir $(DATABASE)) ;; esac
	.build/release/islet serve --listen $(LISTEN) --database '$(DATABASE)' --apns simulator

# A compiler warning fails the build: the log of a fresh build must not contain one. Every suite runs on
# SQLite, the store suites on PostgreSQL too, then the integration suite again on PostgreSQL; the tests start
# and remove their own throwaway PostgreSQL (or use ISLET_TEST_POSTGRES_URL).
test:
	@scripts/install-deps --test
	set -o pipefail; swift build --build-tests 2>&1 | tee .build-test.log
	@! grep -E "warning: " .build-test.log || { echo "make test: compiler warnings (above) fail the build" >&2; exit 1; }
	swift test --skip-build
	ISLET_TEST_ENGINE=postgresql swift test --skip-build --filter IsletIntegrationTests
	$(MAKE) --no-print-directory test-packaging
	$(MAKE) --no-print-directory test-ha

# Islet through its PostgreSQL's failures (issue 47; docs/PRODUCTION.md): a pg_auto_failover formation whose primary's
# machine is lost mid fan-out (five times at 5,000 devices, once at 20,000), two planned switchovers, and (as root:
# a network namespace) a node cut off from PostgreSQL by the network for longer than its lease.
HA_SERVER := .build/debug/islet-test-server
test-ha:
	@scripts/install-deps --test
	swift build --product islet-test-server
	python3 Tests/HA/failover.py --server $(HA_SERVER) --devices 5000 --runs 5
	python3 Tests/HA/failover.py --server $(HA_SERVER) --devices 20000 --runs 1
	python3 Tests/HA/failover.py --server $(HA_SERVER) --devices 5000 --runs 2 --switchover --max-unavailable 5
	@if [ "$$(id -u)" -eq 0 ]; then python3 Tests/HA/partition.py --server $(HA_SERVER); \
	else echo "make test-ha: the partition test needs root (ip netns); skipped"; fi

# The production guide's nginx example in front of Islet, and the Debian package installed, run and purged.
test-packaging:
	Tests/Packaging/test-nginx-proxy.sh .build/debug/islet
	Tests/Packaging/test-deb.sh

# build/islet_<version>_<arch>.deb: binary, man page, systemd unit, /etc/islet/islet.env, docs.
deb: build
	@scripts/build-deb .build/release/islet

# libFuzzer (with AddressSanitizer) on IsletCore's input handling: the JSON parser, the field reader, the
# notification, filter and schema rules. Runs FUZZ_SECONDS from the seed corpus in Fuzz/corpus; a crash
# leaves its input in var/fuzz as crash-*, to be replayed with: .build/fuzz/islet-core-fuzz var/fuzz/crash-…
FUZZ_SECONDS ?= 60
fuzz: deps
	mkdir -p .build/fuzz var/fuzz/corpus
	swiftc -sanitize=fuzzer,address -use-ld=lld -parse-as-library -module-name IsletCoreFuzz -O -g \
		Sources/IsletCore/*.swift Fuzz/IsletCoreFuzz.swift -o .build/fuzz/islet-core-fuzz
	cp -n Fuzz/corpus/* var/fuzz/corpus/
	cd var/fuzz && ../../.build/fuzz/islet-core-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=2048 corpus

# Benchmarks: figures and the machine they came from go into BENCHMARKS.md.
# `apns` runs our APNs client, h2load and aioapns side by side against one sink on 127.0.0.1.
# `e2e` runs Islet end to end (devices registered through the API, a start by filter) against nginx.
BENCH_DEVICES ?= 1000000
BENCH_PUSHES ?= 200000
BENCH_E2E_DEVICES ?= 100000
# `register` compares SQLite with an empty PostgreSQL database when BENCH_POSTGRES_URL names one.
# `updates` is the hot path: updateLiveActivity over 2,000 one-phone activities, as fast as 16 clients go,
# then paced at 1,000/s for 60 s, nginx as APNs; acceptance, arrival and the delivery lag.
# `cluster` delivers one start to BENCH_CLUSTER_DEVICES devices with 1 node, then 3 nodes, on a throwaway PostgreSQL
# (or in schemas of BENCH_POSTGRES_URL's database).
BENCH_POSTGRES_URL ?=
BENCH_CLUSTER_DEVICES ?= 1000000
comma := ,
bench:
	@scripts/install-deps --bench
	swift build $(RELEASE_FLAGS) --product islet-bench
	mkdir -p var
	.build/release/islet-bench devices --count $(BENCH_DEVICES) --database var/bench-devices.sqlite
	.build/release/islet-bench apns --pushes $(BENCH_PUSHES) --python .venv/bin/python3
	.build/release/islet-bench e2e --devices $(BENCH_E2E_DEVICES)
	.build/release/islet-bench e2e --devices $(BENCH_E2E_DEVICES) --platform android
	.build/release/islet-bench register --devices 30000 --clients 16 --database 'var/bench-register.sqlite$(if $(BENCH_POSTGRES_URL),$(comma)$(BENCH_POSTGRES_URL))'
	.build/release/islet-bench updates --activities 2000 --seconds 20
	.build/release/islet-bench updates --activities 2000 --seconds 60 --rate 1000
	.build/release/islet-bench updates --activities 2000 --seconds 20 --event start
	.build/release/islet-bench cluster --devices $(BENCH_CLUSTER_DEVICES) --nodes 1,3$(if $(BENCH_POSTGRES_URL), --database '$(BENCH_POSTGRES_URL)')

clean:
	swift package clean

# Islet: `make run` starts the server, `make test` runs every test. Both install what is missing first.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

LISTEN ?= 127.0.0.1:8080
DATABASE ?= var/islet.sqlite

.PHONY: deps build run test bench clean

deps:
	@scripts/install-deps

build: deps
	swift build -c release

run: build
	mkdir -p $(dir $(DATABASE))
	.build/release/islet serve --listen $(LISTEN) --database $(DATABASE) --apns simulator

test:
	@scripts/install-deps --test
	swift build --build-tests
	swift test --skip-build

# Benchmarks: figures and the machine they came from go into BENCHMARKS.md.
# `apns` runs our APNs client, h2load and aioapns side by side against one sink on 127.0.0.1.
# `e2e` runs Islet end to end (devices registered through the API, a start by filter) against nginx.
BENCH_DEVICES ?= 1000000
BENCH_PUSHES ?= 200000
BENCH_E2E_DEVICES ?= 100000
bench:
	@scripts/install-deps --bench
	swift build -c release --product islet-bench
	mkdir -p var
	.build/release/islet-bench devices --count $(BENCH_DEVICES) --database var/bench-devices.sqlite
	.build/release/islet-bench apns --pushes $(BENCH_PUSHES) --python .venv/bin/python3
	.build/release/islet-bench e2e --devices $(BENCH_E2E_DEVICES)

clean:
	swift package clean

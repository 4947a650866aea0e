# The two commands a newcomer needs (see README.md):
#   make demo   set everything up, start 2 local nginx, sweep them to their knee with plans/demo.yaml
#   make test   set everything up and run every test
# Both work on a fresh Debian 12 machine (as root, or with the Debian packages below installed);
# `make demo` installs only what it needs (DEMO_PACKAGES), `make test` everything.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
ENGINE := agent/engine/target/release/loadfleet-engine
# What `make demo` needs: nginx for the two local servers, and what builds the engine (protoc for
# its wire types, a C compiler and libc headers for ring's assembly) and the venv.
DEMO_PACKAGES := nginx-light protobuf-compiler python3-venv gcc libc6-dev
# What the lab and the tests need besides (`make lab`, part of `make test`): the other servers,
# balancers and NFS of the lab, chromium for the report's browser test, Java and Maven for
# Gatling, systemd for checking the units, docker-compose for checking the compose file, faketime
# for an agent whose clock is off (the chaos suite).
LAB_PACKAGES := wrk nghttp2-client docker-compose chromium faketime apache2 php-fpm haproxy varnish openjdk-17-jdk-headless maven nfs-ganesha nfs-ganesha-vfs libnfs-utils fuse3 iproute2 openssl mariadb-server php-mysql dbus-daemon systemd tomcat10 yaws
PYTHON ?= python3

.PHONY: setup demo-deps system-deps lab python-deps engine report-assets gatling influxdb helm dist demo test lint test-python test-unit test-engine clean

setup: system-deps python-deps engine report-assets gatling influxdb helm

# Installs the Debian packages of $(1) that are missing. A policy-rc.d keeps the packages' stock
# services (Apache on *:80, Varnish, HAProxy, PHP-FPM) from starting on install: the lab runs
# its own instances on loopback only.
define install_debian
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "please install as root: apt-get install $$missing" >&2; exit 1; fi; \
	  echo "installing Debian packages: $$missing"; \
	  guard=; if [ ! -e /usr/sbin/policy-rc.d ]; then guard=1; printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  status=$$?; [ -n "$$guard" ] && rm -f /usr/sbin/policy-rc.d; [ $$status = 0 ] || exit $$status; \
	fi
endef

demo-deps:
	$(call install_debian,$(DEMO_PACKAGES))
	@command -v cargo >/dev/null || { echo "Rust (cargo) is needed: https://rustup.rs" >&2; exit 1; }

# Everything the lab, the builds and the tests need.
system-deps: demo-deps
	$(call install_debian,$(LAB_PACKAGES))

lab: system-deps

# loadfleet-agent depends on loadfleet-engine, the wheel that carries the engine program
# (agent/engine/pyproject.toml): it is packaged by maturin from the release build (no second
# compile) and installed first, which puts the program in $(BIN) beside the interpreter.
# loadfleet-proto depends on loadfleet-buckets (proto/native), the histogram loops in Rust
# (pyo3): maturin builds its wheel, one for every CPython 3.11+ (abi3).
MATURIN := maturin==1.16.0
ENGINE_WHEEL_DIR := build/engine-wheel
NATIVE := proto/native
NATIVE_WHEEL_DIR := build/native-wheel
$(VENV)/.installed: proto/pyproject.toml proto/setup.py proto/loadfleet/v1/*.proto controller/pyproject.toml agent/pyproject.toml targets/pyproject.toml agent/engine/pyproject.toml $(NATIVE)/pyproject.toml $(NATIVE)/Cargo.toml $(NATIVE)/src/*.rs | $(ENGINE)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(MATURIN)
	rm -rf $(ENGINE_WHEEL_DIR) $(NATIVE_WHEEL_DIR)
	$(BIN)/maturin build --release --quiet --manifest-path agent/engine/Cargo.toml --out $(ENGINE_WHEEL_DIR)
	$(BIN)/maturin build --release --quiet --locked --manifest-path $(NATIVE)/Cargo.toml --out $(NATIVE_WHEEL_DIR)
	$(PY) -m pip install -q --force-reinstall --no-deps $(ENGINE_WHEEL_DIR)/loadfleet_engine-*.whl $(NATIVE_WHEEL_DIR)/loadfleet_buckets-*.whl
	$(PY) -m pip install -q -e proto -e targets -e controller -e agent pytest pytest-xdist==3.8.0 hypothesis xmlschema==4.3.2 $(LINTERS)
	touch $@

python-deps: $(VENV)/.installed

$(ENGINE): agent/engine/Cargo.toml agent/engine/build.rs $(wildcard agent/engine/src/*.rs) proto/loadfleet/v1/*.proto
	cargo build --release --quiet --manifest-path agent/engine/Cargo.toml
	touch $@

# The engine goes beside the agent in the venv, where loadfleet-agent finds it (again after
# a rebuild: the wheel installed by python-deps holds the build of its day).
engine: $(ENGINE) python-deps
	install -m 755 $(ENGINE) $(BIN)/loadfleet-engine

# The chart library report.html and compare.html embed inline (uPlot, pinned by
# controller/report-js/package-lock.json): npm installs it into build/report-js, and its
# minified script, style and licence are copied into the controller package (output/report/vendor/,
# package data, not in git), so the wheel carries them and a report opens offline.
REPORT_VENDOR := controller/src/loadfleet/controller/output/report/vendor
REPORT_JS_BUILD := build/report-js
$(REPORT_VENDOR)/uPlot.iife.min.js: controller/report-js/package.json controller/report-js/package-lock.json
	@command -v npm >/dev/null || { echo "Node.js and npm are needed for the report's charts: apt-get install npm" >&2; exit 1; }
	rm -rf $(REPORT_JS_BUILD) && mkdir -p $(REPORT_JS_BUILD) $(REPORT_VENDOR)
	cp controller/report-js/package.json controller/report-js/package-lock.json $(REPORT_JS_BUILD)/
	cd $(REPORT_JS_BUILD) && npm ci --no-audit --no-fund --silent
	cp $(REPORT_JS_BUILD)/node_modules/uplot/dist/uPlot.min.css $(REPORT_JS_BUILD)/node_modules/uplot/LICENSE $(REPORT_VENDOR)/
	cp $(REPORT_JS_BUILD)/node_modules/uplot/dist/uPlot.iife.min.js $(REPORT_VENDOR)/

report-assets: $(REPORT_VENDOR)/uPlot.iife.min.js

# Wheels for load hosts and the controller's host (docs/deploy.md): every Python distribution,
# and loadfleet-engine as a platform wheel carrying the engine program, packaged from the
# release build. On a host with Python 3.11+ alone:
#   pip install --find-links dist loadfleet-agent      (the agent and its engine)
#   pip install --find-links dist loadfleet-controller (the controller and the CLI)
DIST ?= dist
dist: $(ENGINE) python-deps report-assets
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(BIN)/maturin build --release --quiet --manifest-path agent/engine/Cargo.toml --out $(DIST)
	$(BIN)/maturin build --release --quiet --locked --manifest-path $(NATIVE)/Cargo.toml --out $(DIST)
	# setuptools' build/lib of an earlier build would carry modules moved or deleted since into the wheel.
	rm -rf proto/build controller/build agent/build targets/build
	$(PY) -m pip wheel -q --no-deps --wheel-dir $(DIST) ./proto ./controller ./agent ./targets
	@ls -1 $(DIST)

# The Gatling driver (docs/gatling.md): the hook and JobSimulation compiled against Gatling 3.15.1
# from Maven Central; Maven resolves the dependencies once into ~/.m2 and writes the classpath
# the agent launches the JVM with (no Maven at run time).
GATLING_BUILD := agent/gatling/target/classpath.txt
$(GATLING_BUILD): agent/gatling/pom.xml $(wildcard agent/gatling/src/main/java/loadfleet/gatling/*.java) $(wildcard agent/gatling/src/main/resources/*)
	@command -v mvn >/dev/null || { echo "Maven and Java 17 are needed for the Gatling driver: apt-get install maven openjdk-17-jdk-headless" >&2; exit 1; }
	mvn -q -B -f agent/gatling/pom.xml compile
	touch $@

gatling: $(GATLING_BUILD)

# A real InfluxDB 1.8.10 for the tests and for local use (pure Go; 1.11+ and 2.x need Rust Flux).
INFLUXD := $(BIN)/influxd
INFLUX_LDFLAGS := -X main.version=1.8.10 -X main.branch=1.8 -X main.commit=v1.8.10
$(INFLUXD): | python-deps
	@command -v go >/dev/null || { echo "Go is needed to build InfluxDB 1.8.10: https://go.dev/dl" >&2; exit 1; }
	GOBIN=$(abspath $(BIN)) go install -ldflags "$(INFLUX_LDFLAGS)" github.com/influxdata/influxdb/cmd/influxd@v1.8.10

influxdb: $(INFLUXD)

# helm, for the chart's tests (helm lint and helm template of deploy/helm/loadfleet), built from
# the Go module proxy like InfluxDB (~4 min on 2 cores the first time; the module cache stays).
HELM := $(BIN)/helm
HELM_VERSION := v3.22.0
$(HELM): | python-deps
	@command -v go >/dev/null || { echo "Go is needed to build helm: https://go.dev/dl" >&2; exit 1; }
	GOBIN=$(abspath $(BIN)) go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

helm: $(HELM)

# Only what the demo needs (DEMO_PACKAGES, the venv, the engine), not the lab's packages.
# The two nginx of targets/specs/demo.yaml run on CPU 0 (each held to 5 % of it); the run, its
# controller and its agent on the other CPUs (taskset; the agent runs one engine per CPU it may
# use), so that the generator and the servers do not take each other's CPU and the steps measure
# the servers. plans/demo.yaml: a sweep of 5 steps of 6 s to the knee, with thresholds. It ends
# with the knee, the verdict and where the report is (console.closing_lines), and exits as the
# run does (4: a threshold failed).
DEMO_CLOSING := import json, sys; from loadfleet.controller.output.console import closing_lines; \
	print(*closing_lines(json.load(open(sys.argv[1] + "summary.json")), sys.argv[1]), sep="\n")
demo: demo-deps python-deps engine report-assets
	@trap '$(BIN)/loadfleet-lab down --state-dir build/demo-lab' EXIT; \
	$(BIN)/loadfleet-lab up targets/specs/demo.yaml --state-dir build/demo-lab || exit; \
	cpus=$$(nproc); load=$$( [ $$cpus -gt 1 ] && echo 1-$$((cpus - 1)) || echo 0 ); \
	PATH="$(abspath $(BIN)):$$PATH" taskset -c $$load $(BIN)/loadfleet run plans/demo.yaml --local 1 --monitor nginx; \
	status=$$?; run=$$(ls -td runs/*/ 2>/dev/null | head -1); \
	if [ -f "$${run}summary.json" ]; then echo; $(PY) -c '$(DEMO_CLOSING)' "$$run"; fi; \
	exit $$status

test: setup dist lint test-engine test-python

# Static checks, all clean: mypy (mypy.ini: the four packages, from their sources), ruff's lint
# and format (ruff.toml), the dependency direction (.importlinter), rustfmt and clippy with
# warnings as errors for the engine and the histogram loops. python-deps installs the Python tools; the rule below adds
# them to a venv made before it did, and rustup the Rust components when they are missing.
LINTERS := mypy==2.4.1 ruff==0.17.6 import-linter==2.16
lint: python-deps $(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -q -p no:cacheprovider tests/test_code_shape.py  # no function over 50 lines, no controller module over 400
	@cargo clippy --version >/dev/null 2>&1 && cargo fmt --version >/dev/null 2>&1 || rustup component add clippy rustfmt
	cargo fmt --manifest-path agent/engine/Cargo.toml --check
	cargo clippy --release --quiet --all-targets --manifest-path agent/engine/Cargo.toml -- -D warnings
	cargo test --release --quiet --manifest-path agent/engine/Cargo.toml --test module_graph
	cargo fmt --manifest-path $(NATIVE)/Cargo.toml --check
	cargo clippy --release --quiet --all-targets --manifest-path $(NATIVE)/Cargo.toml -- -D warnings
	mvn -q -B -f agent/gatling/pom.xml -P lint clean process-classes

$(BIN)/lint-imports: | python-deps
	$(PY) -m pip install -q $(LINTERS)

test-engine:
	cargo test --release --quiet --manifest-path agent/engine/Cargo.toml

# PYTEST_WORKERS > 1 runs the tests in that many pytest-xdist workers (`make test PYTEST_WORKERS=3`);
# --dist loadgroup keeps the tests of one xdist_group on one worker. Serial (1) by default.
PYTEST_WORKERS ?= 1
PYTEST_PARALLEL := $(if $(filter-out 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup)

# --durations: the 30 slowest tests end the log, where CI shows where the suite's time goes.
test-python:
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest -q $(PYTEST_PARALLEL) --durations=30 tests

# The edit-test loop's lane: every test that starts no process (tests/conftest.py), in about
# a minute. Needs the venv only (make python-deps); `make test` runs these and the rest.
test-unit: python-deps
	LOADFLEET_TEST_LANE=unit $(BIN)/pytest -q $(PYTEST_PARALLEL) -m "not process" tests

clean:
	rm -rf $(VENV) build $(DIST) $(REPORT_VENDOR) agent/engine/target $(NATIVE)/target agent/gatling/target proto/python/loadfleet/v1

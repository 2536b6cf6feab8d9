# toolhost developer commands. `make run` and `make test` set up everything they need on a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS_BIN := $(CURDIR)/.tools/bin
BUF := tools/node_modules/.bin/buf
STAMP := $(VENV)/.installed
PROTO_FILES := $(wildcard proto/toolhost/v1/*.proto)
PY_GEN_DIR := clients/python/src
TS_DIR := clients/ts
PROTOC_GEN_ES := $(TS_DIR)/node_modules/.bin/protoc-gen-es
# The directories `make generate` fills from proto/ (Python by grpcio-tools, Go and TypeScript by buf), and
# the TypeScript client's decoding of google.rpc error details from its vendored proto.
GEN_DIRS := $(PY_GEN_DIR)/toolhost/v1 clients/go/gen $(TS_DIR)/src/gen $(TS_DIR)/src/googleapis
# The baseline `buf breaking` compares proto/ with: the contract as last released (refresh: make proto-baseline).
PROTO_BASELINE := tools/proto-baseline/toolhost-v1.binpb

.PHONY: help run test test-go test-ts fuzz bench soak generate check-generated lint breaking proto-baseline tools \
	venv clean os-packages-test os-packages-bench dist

help:
	@echo "make run              start the server on its defaults (gRPC 127.0.0.1:50051, bundled catalog)"
	@echo "make test             run every test (Python, then the Go and TypeScript clients')"
	@echo "make fuzz             run the Hypothesis fuzz suites (tests/fuzz) random and long, not just derandomized"
	@echo "make generate         regenerate the code made from proto/"
	@echo "make check-generated  fail when the committed generated code differs from proto/"
	@echo "make lint             buf lint, buf breaking (against $(PROTO_BASELINE)), ruff and mypy --strict"
	@echo "make bench            measure toolhost against bare gRPC and the MCP SDK (docs/benchmarks.md)"
	@echo "make soak             20 minutes of mixed calls, checked for growth and failures (SOAK_MINUTES=2: smoke run)"
	@echo "make dist             build the release artifacts into dist/: Python sdists and wheels, the npm tarball"
	@echo "make tools            install pinned grpcurl, grpc-health-probe, actionlint and buf into .tools/ and tools/"

$(STAMP): pyproject.toml clients/python/pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e clients/python -e '.[dev]'
	touch $@

venv: $(STAMP)

# Go tools are pinned in tools/go.mod (tool directives); `go install tool` builds every one of them.
GO_TOOLS := $(addprefix $(TOOLS_BIN)/,grpcurl grpc-health-probe protoc-gen-go protoc-gen-go-grpc actionlint)
$(GO_TOOLS) &: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(TOOLS_BIN) GOFLAGS=-mod=mod go install tool
	touch $(GO_TOOLS)

# npm ci, never npm install: it installs exactly the tracked lock and leaves it unchanged.
$(BUF): tools/package.json tools/package-lock.json
	npm ci --prefix tools --no-audit --no-fund --silent
	touch $@

# protoc-gen-es comes with the TypeScript client's own dependencies, at the version its runtime expects.
$(PROTOC_GEN_ES): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	npm ci --prefix $(TS_DIR) --no-audit --no-fund --silent
	touch $@

tools: $(GO_TOOLS) $(BUF) $(PROTOC_GEN_ES)

# The Debian packages tools/os-packages.txt lists for a purpose (ping, traceroute, PostgreSQL 15 for the tests),
# installed when missing: as root, by sudo -n, or else make stops with the command to run.
# (Named targets, not a pattern rule: make never looks for a pattern rule to build a .PHONY target.)
os-packages-test os-packages-bench:
	tools/ensure-os-packages.sh $(@:os-packages-%=%)

# Loopback opened for the network tools, so that the README's `tcp_port_check host=127.0.0.1` works; a
# TOOLHOST_EGRESS_OPEN of your own (even an empty one) is kept. The file tools get a `default` workspace in the
# data dir (the rule of Config.effective_data_dir), made first because a workspace must exist when the settings
# are read; the file search tools index the same directory. A TOOLHOST_WORKSPACES or TOOLHOST_SEARCH_ROOTS of your
# own (an empty one turns those tools off) is kept.
run: venv
	data="$${TOOLHOST_DATA_DIR:-$${XDG_DATA_HOME:-$$HOME/.local/share}/toolhost}"; (umask 077 && mkdir -p "$$data/workspace") && TOOLHOST_WORKSPACES="$${TOOLHOST_WORKSPACES-default=$$data/workspace}" TOOLHOST_SEARCH_ROOTS="$${TOOLHOST_SEARCH_ROOTS-$$data/workspace}" TOOLHOST_EGRESS_OPEN="$${TOOLHOST_EGRESS_OPEN-127.0.0.0/8,::1/128}" exec $(BIN)/toolhost serve

test: os-packages-test venv tools
	PATH="$(TOOLS_BIN):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-go test-ts

# tests/fuzz with the `long` Hypothesis profile (tests/fuzz/conftest.py): random and many examples, where `make test`
# runs the same properties derandomized and short. Failures found are replayed first next time (.hypothesis/).
fuzz: venv
	HYPOTHESIS_PROFILE=long PATH="$(TOOLS_BIN):$$PATH" $(BIN)/python -m pytest tests/fuzz --timeout=3600 $(PYTEST_ARGS)

# The Go and TypeScript clients' tests start the real Python server from .venv.
test-ts: venv $(PROTOC_GEN_ES)
	npm --prefix $(TS_DIR) test

test-go: venv
	cd clients/go && go vet ./... && go test -count=1 ./...

# The benchmarks' own dependencies (the MCP SDK they compare against with uvicorn's fastest parser and loop,
# matplotlib, profilers) and ghz, the gRPC load generator, pinned here: its module pins an old grpc-go that does
# not belong in tools/go.mod.
BENCH_STAMP := $(VENV)/.bench-installed
GHZ_VERSION := v0.93.0
# The file name carries the version, so changing GHZ_VERSION installs the new one.
GHZ := $(TOOLS_BIN)/ghz-$(GHZ_VERSION)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $@

$(GHZ):
	GOBIN=$(TOOLS_BIN) go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)
	mv $(TOOLS_BIN)/ghz $@

# hey, the HTTP load generator that drives the MCP SDK's server (bench/mcp_compare.py), pinned the same way.
HEY_VERSION := v0.1.4
HEY := $(TOOLS_BIN)/hey-$(HEY_VERSION)

$(HEY):
	GOBIN=$(TOOLS_BIN) go install github.com/rakyll/hey@$(HEY_VERSION)
	mv $(TOOLS_BIN)/hey $@

# Every figure of docs/benchmarks.md, written with bench/results/latest.json. BENCH_ARGS="--only call_path"
# runs one group (see bench/run.py); "--quick" a short smoke run into bench/results/quick.json.
bench:
	@# The Python dependencies and the two Go load generators install side by side: on a fresh clone they are
	@# minutes of downloads each, and `make bench` must finish within ten.
	$(MAKE) --no-print-directory -j3 os-packages-bench $(BENCH_STAMP) $(GHZ) $(HEY)
	GHZ=$(GHZ) HEY=$(HEY) $(BIN)/python -m bench.run $(BENCH_ARGS)

# bench/soak.py: one server under mixed calls for SOAK_MINUTES, sampled each minute; fails on growth after the
# warm-up or on a failed call. A full run writes bench/results/soak.json and the soak's section of
# docs/benchmarks.md; a shorter one is a smoke run (bench/results/soak-quick.json, the page left alone).
SOAK_MINUTES ?= 20

soak: venv
	$(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The release artifacts, into $(DIST_DIR): the Python client's and the server's sdists and wheels in python/ (each
# wheel built from its sdist, which proves the sdist complete), the TypeScript client's npm tarball in npm/ (its
# prepack script compiles it). Go has no artifact: its module is the repository at the tag clients/go/vX.Y.Z.
DIST_DIR ?= $(CURDIR)/dist

dist: venv $(PROTOC_GEN_ES)
	rm -rf $(DIST_DIR)/python $(DIST_DIR)/npm
	$(BIN)/python -m build --outdir $(DIST_DIR)/python clients/python
	$(BIN)/python -m build --outdir $(DIST_DIR)/python .
	mkdir -p $(DIST_DIR)/npm
	cd $(TS_DIR) && npm pack --silent --pack-destination $(DIST_DIR)/npm

# Generated Python goes next to the hand-written client; see clients/python/src/toolhost/v1. $(1) is the root
# of the tree to write (the repository, or a scratch copy for check-generated).
define generate_all
	mkdir -p $(1)/$(PY_GEN_DIR) && \
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=$(1)/$(PY_GEN_DIR) --pyi_out=$(1)/$(PY_GEN_DIR) \
	  --grpc_python_out=$(1)/$(PY_GEN_DIR) $(PROTO_FILES) && \
	PATH="$(TOOLS_BIN):$(CURDIR)/$(TS_DIR)/node_modules/.bin:$$PATH" $(BUF) generate --output $(1) && \
	PATH="$(CURDIR)/$(TS_DIR)/node_modules/.bin:$$PATH" $(BUF) generate $(TS_DIR) \
	  --template $(TS_DIR)/buf.gen.yaml --output $(1)/$(TS_DIR)
endef

generate: venv tools
	rm -rf clients/go/gen $(TS_DIR)/src/gen $(TS_DIR)/src/googleapis
	$(call generate_all,.)

check-generated: venv tools
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(call generate_all,$$tmp) && \
	tools/check-generated.sh $$tmp $(GEN_DIRS) && echo "generated code matches proto/"

breaking: $(BUF)
	$(BUF) breaking --against $(PROTO_BASELINE)

# After a release (or a deliberate, announced break): make the current contract the new baseline.
proto-baseline: $(BUF)
	mkdir -p $(dir $(PROTO_BASELINE))
	$(BUF) build --exclude-source-info -o $(PROTO_BASELINE)

lint: venv $(BUF)
	$(BUF) lint
	$(BUF) breaking --against $(PROTO_BASELINE)
	$(BIN)/ruff check server tests bench clients/python/src
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .tools tools/node_modules

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

.PHONY: help run test bench generate check-generated lint tools venv clean

help:
	@echo "make run              start the server on its defaults (gRPC 127.0.0.1:50051, bundled catalog)"
	@echo "make test             run every test"
	@echo "make generate         regenerate the code made from proto/"
	@echo "make check-generated  fail when the committed generated code differs from proto/"
	@echo "make lint             buf lint, ruff and mypy --strict"
	@echo "make bench            measure toolhost against a bare grpc.aio server (bench/results/)"
	@echo "make tools            install pinned grpcurl, grpc-health-probe and buf into .tools/ and tools/"

$(STAMP): pyproject.toml clients/python/pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e clients/python -e '.[dev]'
	touch $@

venv: $(STAMP)

# Go tools are pinned in tools/go.mod (tool directives); `go install tool` builds every one of them.
$(TOOLS_BIN)/grpcurl $(TOOLS_BIN)/grpc-health-probe &: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(TOOLS_BIN) GOFLAGS=-mod=mod go install tool
	touch $(TOOLS_BIN)/grpcurl $(TOOLS_BIN)/grpc-health-probe

$(BUF): tools/package.json tools/package-lock.json
	# Not `npm ci`: the registry here lacks buf's binaries for other platforms, which npm ci insists on.
	npm install --prefix tools --no-audit --no-fund --silent
	touch $@

tools: $(TOOLS_BIN)/grpcurl $(TOOLS_BIN)/grpc-health-probe $(BUF)

run: venv
	$(BIN)/toolhost serve

test: venv tools
	PATH="$(TOOLS_BIN):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: venv
	$(BIN)/python bench/core_latency.py

# Generated Python goes next to the hand-written client; see clients/python/src/toolhost/v1.
define generate_python
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=$(1) --pyi_out=$(1) --grpc_python_out=$(1) $(PROTO_FILES)
endef

generate: venv
	$(call generate_python,$(PY_GEN_DIR))

check-generated: venv
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(call generate_python,$$tmp) && \
	for f in $$(cd $$tmp && find . -type f | sort); do \
	  cmp -s "$$tmp/$$f" "$(PY_GEN_DIR)/$$f" || { echo "generated code is stale: $(PY_GEN_DIR)/$$f (run make generate)"; exit 1; }; \
	done && \
	for f in $$(cd $(PY_GEN_DIR) && find . -name '*_pb2*' | sort); do \
	  test -e "$$tmp/$$f" || { echo "generated file without a proto: $(PY_GEN_DIR)/$$f"; exit 1; }; \
	done && echo "generated code matches proto/"

lint: venv $(BUF)
	$(BUF) lint
	$(BIN)/ruff check server tests clients/python/src
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .tools tools/node_modules

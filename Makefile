# The two commands of the README's quick start are `make demo` and `make test`; each does its own
# set-up (npm packages with the Kafka client built from source, Maven jars, the local stack).
SHELL := /bin/bash
EO := bin/exactlyonce

.PHONY: deps build demo test test-unit test-integration typecheck docs stack-up stack-down bench bench-verify soak cluster-test image

deps:
	@scripts/install-deps.sh

# Compiles to dist/, which bin/exactlyonce runs while no source is newer (see scripts/build.sh).
build: deps
	@scripts/build.sh

typecheck: deps
	npx tsc --noEmit

# docs/reference.md from the code: every command's --help and the sink config's keys (scripts/docs.ts).
# test/unit/docs-reference.test.ts fails when the committed file is stale.
docs: deps
	node --import tsx scripts/docs.ts

test-unit: deps
	node --import tsx --test --test-force-exit $$(find test/unit -name '*.test.ts' | sort)

# Starts the stack if it is not running and stops it afterwards only in that case.
test-integration: build
	@scripts/with-stack.sh node --import tsx --test --test-force-exit --test-concurrency=1 --test-timeout=1200000 $$(find test/integration -name '*.test.ts' | sort)

test: typecheck test-unit test-integration

demo: build
	@scripts/demo.sh

stack-up: build
	$(EO) stack up

stack-down: deps
	$(EO) stack down

# The benchmark (see bench/README.md); starts the stack if needed, like the tests.
bench: build
	@scripts/with-stack.sh bin/exactlyonce bench

# What verify costs beside the pipeline (bench/verify-throughput.ts): 1,000,000 and 5,000,000 records on
# 6 and 120 partitions, full and incremental; about an hour on 2 cores. Results in bench/results/verify-*.json.
bench-verify: build
	@scripts/with-stack.sh node --import tsx bench/verify-throughput.ts

# A long chaos soak, not run in CI.
soak: build
	@scripts/with-stack.sh bin/exactlyonce chaos --events 1000000 --kills 50 --zombies 5 --cassandra-restarts 3 --kafka-restarts 3

# A bounded chaos run on a local cluster of 3 Cassandra nodes and 3 Kafka brokers (.stack/cluster),
# ending in verify; not part of `make test` (it takes ~4.2 GiB of RAM and several minutes: docs/guarantees.md, "A local cluster: 3 Cassandra nodes, 3 Kafka brokers").
cluster-test: build
	@scripts/cluster-test.sh

# The worker's container image, exactlyonce:<version> (deploy/image/Containerfile, docs/deployment.md):
# podman (and, where no registry can be pulled from, a Debian base made with mmdebstrap) installed
# through apt-get when missing; reused while its inputs do not change.
image:
	@scripts/image.sh

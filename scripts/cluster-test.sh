#!/usr/bin/env bash
# `make cluster-test`: a bounded chaos run on a local cluster of 3 Cassandra nodes and 3 Kafka brokers
# (its own stack dir, default <repo>/.stack/cluster; override with EXACTLYONCE_CLUSTER_DIR), ending in
# verify. Starts the cluster when it is not running and, in that case only, stops it afterwards.
# Extra arguments go to `exactlyonce chaos` (e.g. --seed N to replay another schedule).
set -uo pipefail
cd "$(dirname "$0")/.."
EO=bin/exactlyonce
export EXACTLYONCE_STACK_DIR="${EXACTLYONCE_CLUSTER_DIR:-$PWD/.stack/cluster}"
# The connection defaults then point at the cluster (cluster.json); nothing else may override them.
unset EXACTLYONCE_BROKERS EXACTLYONCE_CASSANDRA
started=0
if ! $EO stack status >/dev/null 2>&1; then
  $EO stack up --cassandra-nodes 3 --kafka-brokers 3 --commitlog periodic || exit $?
  started=1
fi
stop() { if [ "$started" = 1 ]; then $EO stack down; fi; }
trap stop EXIT
trap 'exit 130' INT TERM
# 3 worker kills, a zombie, 2 malformed bursts; SIGKILL of a Cassandra node (down 10-25 s, RF 3:
# the workers keep writing at LOCAL_QUORUM), of the broker leading a partition being read and of the
# active controller, and two of the three Cassandra nodes at once (no quorum: the workers stop, say
# so once, and resume).
# Seed 1007 kills the Cassandra node first, then two nodes, while the generator still produces.
$EO chaos --seed "${CLUSTER_TEST_SEED:-1007}" --events 48000 --duration 360 --workers 3 --partitions 6 \
  --kills 3 --zombies 1 --cassandra-restarts 1 --kafka-restarts 2 --cassandra-outages 1 \
  --add-remove 1 --injections 2 --json "$@"

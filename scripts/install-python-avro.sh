#!/usr/bin/env bash
# Installs Debian's Python Kafka client with its Avro support, an independent producer for the test
# that proves a record written by a client that is not ours lands exactly once
# (test/integration/sink-python-producer.test.ts): python3-confluent-kafka's AvroProducer registers the
# schemas and writes the Confluent wire format through the Schema Registry. From apt like every other
# system package. Idempotent: does nothing when the modules import already.
set -euo pipefail
# Debian's own interpreter, where its packages are (a pyenv or venv python3 on PATH does not see them).
PY=/usr/bin/python3
if [ -x "$PY" ] && "$PY" -c 'import confluent_kafka.avro, avro, requests' 2>/dev/null; then
  exit 0
fi
"$(dirname "$0")/apt-install.sh" "the independent-producer test" python3 python3-confluent-kafka python3-avro python3-requests
"$PY" -c 'import confluent_kafka.avro, avro, requests; import confluent_kafka; print("confluent-kafka", confluent_kafka.version()[0])' >&2

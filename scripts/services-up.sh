#!/usr/bin/env bash
# `npm run services:up`: PostgreSQL (5432), RabbitMQ (5672) and Kafka (9092) on their standard
# local ports, each started only when nothing answers there yet, and ready before this returns.
# Kafka is a real single-node Apache Kafka 4.x broker (KRaft) run from Maven Central jars, no
# Docker; its jars and data live in a cache outside the repository (NOTIFY_EDGE_CACHE).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
KAFKA_VERSION=4.1.1
CACHE="${NOTIFY_EDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/notify-edge}"
KAFKA_HOME="$CACHE/kafka-$KAFKA_VERSION"
STATE="$CACHE/started"
mkdir -p "$CACHE" "$STATE"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name, seconds, command...
  local name=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$seconds"); do
    if "$@" >/dev/null 2>&1; then echo "services: $name is up"; return 0; fi
    sleep 1
  done
  echo "services: $name did not come up within ${seconds}s" >&2
  return 1
}

# PostgreSQL
if listening 5432; then
  echo "services: postgresql already listens on 5432"
elif command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  touch "$STATE/postgresql"
  wait_for postgresql 60 pg_isready -h 127.0.0.1 -p 5432 -q
else
  echo "services: nothing on 5432 and no pg_ctlcluster to start PostgreSQL (or: docker compose up -d postgres)" >&2
  exit 1
fi

# RabbitMQ
if listening 5672; then
  echo "services: rabbitmq already listens on 5672"
elif command -v rabbitmq-server >/dev/null 2>&1; then
  rabbitmq-server -detached
  touch "$STATE/rabbitmq"
  wait_for rabbitmq 120 listening 5672
else
  echo "services: nothing on 5672 and no rabbitmq-server to start RabbitMQ (or: docker compose up -d rabbitmq)" >&2
  exit 1
fi

# Kafka
if listening 9092; then
  echo "services: kafka already listens on 9092"
  exit 0
fi
command -v java >/dev/null || { echo "services: Kafka needs Java 17 (java not found)" >&2; exit 1; }
if [ ! -f "$KAFKA_HOME/lib/kafka_2.13-$KAFKA_VERSION.jar" ]; then
  echo "services: fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $KAFKA_HOME/lib"
  mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$KAFKA_HOME/lib"
fi
mkdir -p "$KAFKA_HOME/data" "$KAFKA_HOME/logs"
{ cat "$here/kafka/server.properties"; echo "log.dirs=$KAFKA_HOME/data"; } > "$KAFKA_HOME/server.properties"
java_opts=(-Xms256m -Xmx768m "-Dlog4j2.configurationFile=$here/kafka/log4j2.properties" "-Dkafka.logs.dir=$KAFKA_HOME/logs")
if [ ! -f "$KAFKA_HOME/data/meta.properties" ]; then
  cluster_id="$(java -cp "$KAFKA_HOME/lib/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  java "${java_opts[@]}" -cp "$KAFKA_HOME/lib/*" kafka.tools.StorageTool format --standalone \
    -t "$cluster_id" -c "$KAFKA_HOME/server.properties" >"$KAFKA_HOME/logs/format.out" 2>&1
fi
echo "services: starting kafka $KAFKA_VERSION (KRaft) on 9092"
nohup java "${java_opts[@]}" -cp "$KAFKA_HOME/lib/*" kafka.Kafka "$KAFKA_HOME/server.properties" \
  >"$KAFKA_HOME/logs/kafka.out" 2>&1 &
echo $! >"$STATE/kafka.pid"
kafka_started() { grep -q "Kafka Server started" "$KAFKA_HOME/logs/server.log" 2>/dev/null && listening 9092; }
wait_for kafka 120 kafka_started || { tail -n 30 "$KAFKA_HOME/logs/kafka.out" "$KAFKA_HOME/logs/server.log" >&2 || true; exit 1; }

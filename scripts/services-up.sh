#!/usr/bin/env bash
# `npm run services:up`: make the services the bridge and its tests use available on their
# standard local ports, starting each one only when nothing answers there yet.
# Today: PostgreSQL on 127.0.0.1:5432. (RabbitMQ and Kafka join with the bridge's other sources.)
set -euo pipefail

wait_for() { # name, command...
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then echo "services: $name is up"; return 0; fi
    sleep 1
  done
  echo "services: $name did not come up" >&2
  return 1
}

if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "services: postgresql already listens on 5432"
elif command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "services: starting postgresql"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  wait_for postgresql pg_isready -h 127.0.0.1 -p 5432 -q
else
  echo "services: no PostgreSQL on 127.0.0.1:5432 and no pg_ctlcluster to start one (docker compose up postgres works too)" >&2
  exit 1
fi

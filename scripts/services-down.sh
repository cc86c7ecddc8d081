#!/usr/bin/env bash
# `npm run services:down`: stops what `npm run services:up` started (and nothing it found running).
set -uo pipefail
CACHE="${NOTIFY_EDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/notify-edge}"
STATE="$CACHE/started"

if [ -f "$STATE/kafka.pid" ]; then
  pid="$(cat "$STATE/kafka.pid")"
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    echo "services: kafka stopped"
  fi
  rm -f "$STATE/kafka.pid"
fi
if [ -f "$STATE/rabbitmq" ]; then
  rabbitmqctl stop >/dev/null 2>&1 && echo "services: rabbitmq stopped"
  rm -f "$STATE/rabbitmq"
fi
if [ -f "$STATE/postgresql" ]; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main stop && echo "services: postgresql stopped"
  rm -f "$STATE/postgresql"
fi
exit 0

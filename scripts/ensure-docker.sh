#!/usr/bin/env bash
# Make sure a Docker engine answers on /var/run/docker.sock; start one if none does.
# The engine gets no bridge network: containers run with network host or none, so all
# traffic stays on loopback.
set -euo pipefail
if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  echo "engine $(docker version --format '{{.Server.Version}}') already running"
  exit 0
fi
command -v dockerd >/dev/null || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
mkdir -p /var/log
nohup dockerd --bridge=none --iptables=false --ip-forward=false >/var/log/tt-model-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    echo "engine $(docker version --format '{{.Server.Version}}') started"
    exit 0
  fi
  sleep 1
done
echo "dockerd did not come up in 60 s; last lines of its log:" >&2
tail -20 /var/log/tt-model-dockerd.log >&2
exit 1

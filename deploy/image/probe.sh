#!/bin/bash
# exactlyonce-probe [PATH] [PORT]: asks the worker's metrics server, from inside its container, for
# PATH (default /readyz) on 127.0.0.1:PORT (default 9464) and exits 0 on a 200, 1 otherwise.
#
# Why an exec probe and not an httpGet one: a kubelet's httpGet probe comes from outside the pod, so
# the server must bind beyond loopback (EXACTLYONCE_METRICS_HOST=0.0.0.0), and there it answers every
# path, /healthz and /readyz included, only with the token (src/engine/http-access.ts). An httpGet
# probe can send it only as a literal header in the pod spec, where `kubectl describe` shows it. This
# reads it from the mounted file instead (EXACTLYONCE_HTTP_TOKEN_FILE). Plain bash (/dev/tcp), no curl
# and no second node process: it costs a few MiB and milliseconds a probe.
set -u
path=${1:-/readyz}
port=${2:-9464}
auth=""
if [ -n "${EXACTLYONCE_HTTP_TOKEN_FILE:-}" ]; then
  IFS= read -r token < "$EXACTLYONCE_HTTP_TOKEN_FILE" || [ -n "${token:-}" ] || { echo "cannot read $EXACTLYONCE_HTTP_TOKEN_FILE"; exit 1; }
  auth="Authorization: Bearer ${token%$'\r'}"$'\r\n'
fi
exec 3<>"/dev/tcp/127.0.0.1/$port" || { echo "nothing listens on 127.0.0.1:$port"; exit 1; }
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s\r\n' "$path" "$auth" >&3
IFS= read -r -t 5 status <&3 || { echo "no answer from 127.0.0.1:$port$path"; exit 1; }
body=$(timeout 2 cat <&3 | tail -n 1)
case "$status" in
  "HTTP/1."?" 200 "*) exit 0 ;;
  *) echo "${status%$'\r'}: $body"; exit 1 ;;
esac

#!/bin/sh
# Redis from Debian's packages (docker/images.py, image `redis`): the command (redis-server ...) runs as
# the package's `redis` user, in /data (the volume), which is made its own first.
set -eu
if [ "$(id -u)" = 0 ]; then
  mkdir -p /data
  chown redis:redis /data
  exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"

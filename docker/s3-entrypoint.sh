#!/bin/sh
# An S3-compatible server (docker/images.py, image `s3`): moto in server mode, from a venv of exact
# wheel versions. Arguments go to moto_server (-H HOST -p PORT). State is in memory only.
set -eu
exec /opt/venv/bin/moto_server "$@"

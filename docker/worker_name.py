"""Airflow's ``[core] hostname_callable`` for components sharing one host's network (compose.host.yaml).

With host networking every container has the host's hostname, so the task instances of both Celery
workers would record the same ``hostname``. Each worker names itself in ``REPRO_WORKER_NAME`` instead;
the others fall back to the host's name, as Airflow's default does.
"""

import os
import socket


def worker_name() -> str:
    return os.environ.get("REPRO_WORKER_NAME") or socket.getfqdn()

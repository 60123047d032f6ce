"""Airflow plugin: repro-audit's registry webhook receiver (``auditor.airflow.webhook``), served inside the API server
at ``/repro-audit/mlflow``. Deploy this folder as Airflow's plugins folder (``AIRFLOW__CORE__PLUGINS_FOLDER``) beside
the DAGs folder; the image in ``docker/Dockerfile`` does.

A folder, not a package entry point: an entry point is found once per installed copy of the distribution, and an
editable install seen twice (its ``.egg-info`` on ``PYTHONPATH`` as well) made Airflow record a duplicate-plugin import
error, after which task processes ran without their listeners (OpenLineage's task events went missing).
"""

from auditor.airflow.webhook import ReproAuditPlugin  # noqa: F401 - Airflow finds the plugin class in this module

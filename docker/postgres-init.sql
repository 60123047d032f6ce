-- Runs once, on the first start of an empty data volume: MLflow's backend lives beside Airflow's
-- metadata in the same server, in its own database, owned by the same role (POSTGRES_USER).
CREATE DATABASE mlflow;

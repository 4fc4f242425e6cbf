"""Everything written or shown: the report file, MLflow tracking (the only mlflow importer), the console, plots,
sweep summaries and run comparison. Writes; never measures."""

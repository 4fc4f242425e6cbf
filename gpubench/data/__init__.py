"""Market data: synthetic generator -> DBN files, DBN reader, Parquet cache, features and windows."""

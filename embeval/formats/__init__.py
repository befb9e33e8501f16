"""The files embeval reads and writes: sentence export, vectors file, results JSON, predictions, atomic writes."""

"""The node agent: reads GPUs and scheduler jobs, sends ingest batches. Never imports Django."""

"""The data room: FiD files in (validated record by record), tokenized [B, K] batches out.
Imports neither `rerag.models` nor the demo."""

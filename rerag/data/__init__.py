"""The data room: FiD files in (validated record by record), tokenized [B, K] batches out, and builders
of FiD files from other formats (`squad.py`, with contexts from eor's retrievers). Imports neither
`rerag.models` nor the demo."""

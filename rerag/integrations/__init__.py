"""EoR and eRAG run on a trained RE-RAG model (`rerag eor`, `rerag erag`)."""

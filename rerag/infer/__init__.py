"""What a trained model is used for: export, rerank, readers, predict, the unanswerable report."""

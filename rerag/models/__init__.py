"""The models room: the relevance estimator, the generator, loading from names, folders and
configs, LoRA. Imports neither `rerag.data` nor the demo."""

"""The models room: the relevance estimator, the generator, loading from names, folders and
configs, LoRA. Imports neither `rerag.data` nor the demo."""

# Registers model type `pointer_t5` (the demo's shipped reader) with the Auto classes, for every
# loader below; `import rerag` alone stays free of torch, so `rerag --help` starts fast.
import rerag.models.pointer_t5  # noqa: E402, F401

"""The embedded default's machinery: the synthetic world and its datamodule, the demo tokenizer,
the shipped copy-head reader (model type `pointer_t5`) and its pretraining. Nothing in the
method, data, models or infer rooms imports this room; `import rerag` registers `pointer_t5`."""

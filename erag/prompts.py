"""Every prompt the eRAG package writes by default, in one place.

The readers fill `{question}` and `{context}` (a question's documents, joined); a tokenizer with a
chat template wraps the filled prompt as the user's turn.
"""

#: `erag.readers.HFReader`'s prompt: the document(s), the question, and an "Answer:" to complete.
HF_READER_PROMPT = "Answer the question using the context.\nContext: {context}\nQuestion: {question}\nAnswer:"

#: The LM wrappers' prompt (`erag.lm.Seq2SeqLM`, `erag.lm.CausalLM`): a short answer from the context.
LM_READER_PROMPT = (
    "Answer the question with a short phrase from the context.\n\nContext:\n{context}\n\nQuestion: {question}"
)

#: The LLM-as-judge relevance baseline (`erag.baselines`): the document follows as context.
JUDGE_PROMPT = (
    "Is the document relevant to the question, that is, does it help to answer it? "
    "Reply with yes or no only.\nQuestion: {question}"
)

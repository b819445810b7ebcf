"""The EoR paper's prompts for Llama2-chat (appendix C.2), in one place.

The readers fill `{question}` and `{context}`; the retriever ops fill `{query}` and `{document}`.
"""

#: Retrieval-augmented generation: the reader answers from the retrieved paragraphs.
RALM_PROMPT = (
    "Assuming the following paragraphs are true:\n\n{context}\n\n"
    "Please directly answer the following question with one or few words: {question}"
)

#: Retrieval-free generation: the reader answers from its parametric knowledge.
RETRIEVAL_FREE_PROMPT = "Please directly answer the following question with one or few words: {question}"

#: Parametric knowledge (PK): the LLM writes a background document, as in GenRead (Yu et al., 2023).
PK_PROMPT = "Generate a background document to answer the given question. {query}."

#: Compression (CP): an LLM summary of a retriever's passages.
CP_PROMPT = (
    "Please truthfully summarize the document below, the summary should contain the most important "
    "information relevant to answer the query and be within 200 words:\n\n"
    "query: {query}\n\ndocument: {document}\n\nsummary:"
)

"""Every prompt the RE-RAG package writes by default, in one place.

Templates are filled by `rerag.inputs.fill` with `{question}`, `{title}`, `{text}` and `{context}`
(the title, a newline, the text); fields a template lacks are ignored. A config's `re_template`,
`generator_template` or `teacher_template` replaces them for a run.
"""

#: The RE's and the generator's input (FiD's "question: ... title: ... context: ..." form, as the
#: paper's T5 models read it).
DEFAULT_TEMPLATE = "question: {question} title: {title} context: {text}"

#: A closed-book reader's input: the question alone (`rerag.infer.readers.ClosedBookReader`).
CLOSED_BOOK_TEMPLATE = "Answer the question with a short phrase.\n\nQuestion: {question}"

#: UPR's instruction (Sachan et al., 2022): a zero-shot LM reads a passage, then scores the question
#: (`rerag.infer.upr`).
UPR_TEMPLATE = "Passage: {text}\nPlease write a question based on this passage."

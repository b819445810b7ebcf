from eor import PK_PROMPT, ParametricRetriever


def test_parametric_retriever_prompts_generate_with_the_genread_template():
    prompts = []

    def generate(batch):
        prompts.extend(batch)
        return [f"doc {i}" for i in range(len(batch))]

    results = ParametricRetriever(generate).retrieve(["Who wrote Hamlet?", "Where is Paris?"])
    assert prompts == [PK_PROMPT.format(query="Who wrote Hamlet?"), PK_PROMPT.format(query="Where is Paris?")]
    assert prompts[0] == "Generate a background document to answer the given question. Who wrote Hamlet?."
    assert [[p.text for p in r] for r in results] == [["doc 0"], ["doc 1"]]
